// Package grammars will hold structured output: regex, JSON Schema and EBNF compiled to
// token automata over the model vocabulary (FillMask, Accept, Rollback, ForcedTokens).
// Nothing is built here yet; the directory exists because the package layout is fixed.
package grammars
