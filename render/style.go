package render

// Style decides how text output looks.
type Style struct {
	// Color enables ANSI colors (the caller decides: a terminal, no --no-color).
	Color bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

func (s Style) paint(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return code + text + ansiReset
}

func (s Style) bad(text string) string  { return s.paint(ansiRed, text) }
func (s Style) warn(text string) string { return s.paint(ansiYellow, text) }
func (s Style) good(text string) string { return s.paint(ansiGreen, text) }
func (s Style) dim(text string) string  { return s.paint(ansiDim, text) }
func (s Style) bold(text string) string { return s.paint(ansiBold, text) }
