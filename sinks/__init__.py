"""Where the stage's decisions go: segment storage, produce responses, dead letters, metrics."""
