package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// serverColumns says whether a listing of rows shows IMAGE and LIMITS: each only
// when some row has one (a container runtime), so that other listings stay as
// narrow as they were.
func serverColumns(rows []branches.ServerView) (image, limits bool) {
	image = slices.ContainsFunc(rows, func(v branches.ServerView) bool { return v.Image != "" })
	limits = slices.ContainsFunc(rows, func(v branches.ServerView) bool { return limitsText(v) != "-" })
	return image, limits
}

// serverCells is the IMAGE and LIMITS cells of a row, as serverColumns chose them,
// each after a tab.
func serverCells(v branches.ServerView, image, limits bool) string {
	s := ""
	if image {
		s += "\t" + orDash(v.Image)
	}
	if limits {
		s += "\t" + limitsText(v)
	}
	return s
}

// serverHeader is the header cells serverCells fills.
func serverHeader(image, limits bool) string {
	s := ""
	if image {
		s += "\tIMAGE"
	}
	if limits {
		s += "\tLIMITS"
	}
	return s
}

// limitsText is a server's limits as the flags that set them take them
// ("memory=512MB cpus=0.5 pids=200"), "-" for none.
func limitsText(v branches.ServerView) string {
	var parts []string
	if v.MemoryBytes > 0 {
		parts = append(parts, "memory="+sizeText(v.MemoryBytes))
	}
	if v.CPUs > 0 {
		parts = append(parts, "cpus="+strconv.FormatFloat(v.CPUs, 'f', -1, 64))
	}
	if v.PIDs > 0 {
		parts = append(parts, "pids="+strconv.FormatInt(v.PIDs, 10))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// sizeText writes n bytes in the largest unit --branch-memory takes (1024-based,
// as Postgres reads memory settings) not above n: whole when it divides n, else
// to a tenth (512MB, 1.5GB).
func sizeText(n int64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for i+1 < len(units) && n >= 1<<(10*(i+1)) {
		i++
	}
	if n%(1<<(10*i)) == 0 {
		return fmt.Sprintf("%d%s", n>>(10*i), units[i])
	}
	return strconv.FormatFloat(float64(n)/float64(int64(1)<<(10*i)), 'f', 1, 64) + units[i]
}
