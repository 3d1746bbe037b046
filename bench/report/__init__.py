"""The HTML report (run directories in, a static offline site out: `site`) and the terminal
rendering of records (`terminal`). Nothing is re-exported here, so printing a summary does not
load jinja2 or plotly."""
