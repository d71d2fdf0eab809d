"""Marshmallow schemas by what they hold: field types (`field_types`), the record schemas
(`records`), the prose of the OpenAPI document (`about`), the list cursor (`cursor`) and the
fast record dump (`fast_dump`)."""
