"""The OpenAPI document and the interactive API documentation page."""
