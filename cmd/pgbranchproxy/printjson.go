package main

import (
	"encoding/json"
	"io"
	"os"
)

// printJSON writes v to standard output as indented JSON, as every --json
// listing does.
func printJSON(v any) error { return printJSONTo(os.Stdout, v) }

// printJSONTo is printJSON to w (a command's OutOrStdout).
func printJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
