package main

import (
	"fmt"
	"strconv"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// sizeFlag is a flag holding a byte count written like 500MB or 2GB.
type sizeFlag struct{ p *int64 }

func (f sizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatInt(*f.p, 10)
}

func (f sizeFlag) Set(s string) error {
	n, ok := router.ParseSize(s)
	if !ok {
		return fmt.Errorf("%q is not a size: use e.g. 500MB, 2GB or a number of bytes", s)
	}
	*f.p = n
	return nil
}

func (f sizeFlag) Type() string { return "size" }
