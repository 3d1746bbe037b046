"""What every section of a record shares: typed fields that readers use, and every other field
kept as it was written.

A record is read long after it was written (nightly stores hold months of runs), so a section
never rejects a field it does not know and never loses one: reading a record and writing it again
gives back the same JSON. Numbers stay as they were written (an integer is not turned into a
float), and a field the record does not have stays absent rather than becoming null.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

# A JSON number kept as written: 5 stays 5 and 5.0 stays 5.0 (pydantic would make a float of 5).
Number = Annotated[float | int, WithJsonSchema({"type": "number"})]


class Section(BaseModel):
    """A part of the record: the typed fields its readers use; unknown fields are kept."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The section as written: the fields it was given (an absent one stays absent)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def field(description: str, default: Any = None, **kwargs: Any) -> Any:
    """A described field (its description is the reference page's): None when absent."""
    if "default_factory" in kwargs:
        return Field(description=description, **kwargs)
    return Field(default, description=description, **kwargs)
