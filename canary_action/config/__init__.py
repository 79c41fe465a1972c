"""The canary config: schema, loading (YAML, --set overrides, readable errors) and thresholds."""
