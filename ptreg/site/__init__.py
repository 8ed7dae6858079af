"""The registry as a static website (`ptreg site`): page data gathered from the views, charts
drawn at build time, HTML from escaped templates, and a manifest that lets `--changed` rebuild
only the pages whose inputs moved (docs/site.md)."""
