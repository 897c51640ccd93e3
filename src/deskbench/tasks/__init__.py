"""Task, submission and trajectory formats (pydantic), with readers that name the bad line."""
