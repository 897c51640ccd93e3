"""The docqa track's tools served over the Model Context Protocol, so an agent built elsewhere
(any framework, any language) can be evaluated on the same tools the built-in agents use, with
every call recorded into an episode. Needs the optional `mcp` extra."""
