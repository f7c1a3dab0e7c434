"""Graph transformations: `expand` (grad macros, via the J transform in `ad`), and later
type inference and the optimizer."""
