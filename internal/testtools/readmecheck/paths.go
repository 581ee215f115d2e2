package readmecheck

import (
	"path"
	"regexp"
	"strings"
)

var (
	codeSpan   = regexp.MustCompile("`([^`\\s]+)`")
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	urlScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	pattern    = regexp.MustCompile(`[*?{}<>$]|\.\.\.`)
)

// Paths returns the files of the repository a Markdown file points to, as paths
// relative to the repository root: each relative link target (resolved against
// dir, the file's own directory there, its #fragment dropped) and each code span
// that is a path whose first element isTop says is one of the repository's
// directories ("testdata/bench/x.log", "./scripts/cpu-split.py"). Spans that hold
// a pattern or a placeholder ("testdata/*/oracle.txt", "DIR/x", "...") are not
// paths; each path is returned once, in the order first met.
func Paths(md []byte, dir string, isTop func(string) bool) []string {
	var paths []string
	seen := map[string]bool{}
	add := func(p string) {
		p = path.Clean(p)
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	text := string(md)
	for _, m := range linkTarget.FindAllStringSubmatch(text, -1) {
		t, _, _ := strings.Cut(m[1], "#")
		if t != "" && !urlScheme.MatchString(t) && !strings.HasPrefix(t, "/") {
			add(path.Join(dir, t))
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		t := strings.TrimPrefix(m[1], "./")
		top, _, ok := strings.Cut(t, "/")
		if ok && isTop(top) && !pattern.MatchString(t) {
			add(t)
		}
	}
	return paths
}
