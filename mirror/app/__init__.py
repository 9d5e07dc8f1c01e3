"""The local library app (`mirror ui`) and the site files it edits."""
