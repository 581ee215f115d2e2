package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/hostfs"
)

// defaultConfig is the configuration file read when --config is not given and
// the file exists.
var defaultConfig = "/etc/p2pcheck/p2pcheck.conf"

// errConfig is wrapped by every error about a configuration file's content.
var errConfig = errors.New("config")

// config is what a configuration file sets; a nil field was not set.
type config struct {
	require      []check.Capability
	expect       *check.Expectation
	aerThreshold *uint64
}

// parseConfig parses a configuration file: "key = value" lines, blank lines and
// lines starting with '#' ignored, the keys
//
//	require = p2p,gdr         what the node is for, as --require takes it
//	expect = gpus=8,rdma-nics=8   the devices it must have, as --expect takes it
//	aer-threshold = 100       as --aer-threshold
//
// A key set twice, an unknown key or a bad value is an error naming the line.
func parseConfig(b []byte) (config, error) {
	var c config
	seen := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return config{}, fmt.Errorf("%w: line %d: want key = value, not %q", errConfig, i+1, clipLine(line))
		}
		if seen[k] {
			return config{}, fmt.Errorf("%w: line %d: %s set twice", errConfig, i+1, clipLine(k))
		}
		seen[k] = true
		switch k {
		case "require":
			req, err := check.ParseRequirements(v)
			if err != nil {
				return config{}, fmt.Errorf("%w: line %d: require: %w", errConfig, i+1, err)
			}
			c.require = req
		case "expect":
			e, err := check.ParseExpectation(v)
			if err != nil {
				return config{}, fmt.Errorf("%w: line %d: expect: %w", errConfig, i+1, err)
			}
			c.expect = &e
		case "aer-threshold":
			n, err := parseThreshold(v)
			if err != nil {
				return config{}, fmt.Errorf("%w: line %d: aer-threshold: %w", errConfig, i+1, err)
			}
			c.aerThreshold = &n
		default:
			return config{}, fmt.Errorf("%w: line %d: unknown key %q (valid: require, expect, aer-threshold)", errConfig, i+1, clipLine(k))
		}
	}
	return c, nil
}

// parseThreshold parses a positive count.
func parseThreshold(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("want a positive whole number, not %q", clipLine(s))
	}
	return n, nil
}

// clipLine keeps what an error quotes from a hostile file short.
func clipLine(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// readConfig reads the configuration file path, a file the user names, counting
// on m; with explicit false, a missing file is no error (the default path is read
// only when present). A file too large or not a regular file (a FIFO, a device)
// is an error wrapping errConfig.
func readConfig(m *hostfs.Meter, path string, explicit bool) (config, error) {
	b, err := hostfs.ReadNamed(m, path, kindConfig)
	switch {
	case !explicit && errors.Is(err, os.ErrNotExist):
		return config{}, nil
	case errors.Is(err, hostfs.ErrTooLarge), errors.Is(err, hostfs.ErrNotFile):
		return config{}, fmt.Errorf("%w: %w", errConfig, err)
	case err != nil:
		return config{}, err
	}
	c, err := parseConfig(b)
	if err != nil {
		return config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
