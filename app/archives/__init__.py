"""A folder as one ZIP: every downloadable record under a path, streamed as stored entries."""
