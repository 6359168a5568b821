package main

import (
	"fmt"
	"io"

	"deepinfer/deploy"
)

func schemaCmd(args []string, w io.Writer) error {
	if len(args) != 1 || args[0] != "deploy" {
		return usageError{Err: fmt.Errorf("usage: dic schema deploy")}
	}
	_, err := io.WriteString(w, deploy.Schema)
	return err
}
