"""Scenario files: the schema, cross-field rules, matrix expansion into Variants, and loading."""
