"""What every section of a record shares: typed fields, strict for writers and lenient for
readers.

A writer (the worker, a launcher, the runner) builds a section from its fields: a field the
section does not have is an error where it is written (`Timing(wramup_s=...)`, or a dict with
that key set on a record), never a key kept silently that every reader then sees as None.

A record is read long after it was written (nightly stores hold months of runs, and a newer
bench may have written fields this one does not know), so reading (`model_validate(data,
extra="allow")`, as `VariantRecord.load` does) keeps every field it does not know, and writing
the record again gives back the same JSON. Numbers stay as they were written (an integer is not
turned into a float), and a field the record does not have stays absent rather than becoming
null.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    model_serializer,
)

# A JSON number kept as written: 5 stays 5 and 5.0 stays 5.0 (pydantic would make a float of 5).
Number = Annotated[float | int, WithJsonSchema({"type": "number"})]

# How a reader validates a stored record: its unknown fields are kept, not refused.
READING = "allow"


def _readers_keep_unknown_fields(schema: dict[str, Any]) -> None:
    """The JSON Schema describes the file a reader takes: fields it does not list may be there."""
    schema["additionalProperties"] = True


class Section(BaseModel):
    """A part of the record: the typed fields its readers use. A writer may set only those; a
    record read back keeps every other field it holds (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True,
                              json_schema_extra=_readers_keep_unknown_fields)

    @model_serializer(mode="wrap")
    def _with_unknown_fields(self, handler: SerializerFunctionWrapHandler):
        """The fields, and those a stored record held that this bench does not know. No return
        annotation: pydantic then describes the output by the section's own JSON Schema."""
        data = handler(self)
        if self.__pydantic_extra__:
            data.update(self.__pydantic_extra__)
        return data

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field, validated (an unknown name is an error); a record read back keeps its
        unknown fields, which pydantic's validation of the assignment would drop."""
        kept = self.__pydantic_extra__
        super().__setattr__(name, value)
        if kept and not self.__pydantic_extra__:
            object.__setattr__(self, "__pydantic_extra__", kept)

    def to_json(self) -> dict[str, Any]:
        """The section as written: the fields it was given (an absent one stays absent)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def field(description: str, default: Any = None, **kwargs: Any) -> Any:
    """A described field (its description is the reference page's): None when absent."""
    if "default_factory" in kwargs:
        return Field(description=description, **kwargs)
    return Field(default, description=description, **kwargs)
