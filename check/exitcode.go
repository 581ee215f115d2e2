package check

// Exit codes of p2pcheck, defined once: the report's ExitCode and JSON
// "exit_code" use the first four, and the command line adds ExitUsage. The
// README's "Exit codes" table documents them.
const (
	// ExitPass: every required check passed (warnings allowed).
	ExitPass = 0
	// ExitFail: at least one check failed.
	ExitFail = 1
	// ExitWarn: warnings present and --fail-on=warn given.
	ExitWarn = 2
	// ExitNoEval: p2pcheck could not evaluate the node: no sysfs, an unreadable
	// snapshot, a budget exceeded, an I/O error (an output that could not be
	// written), a required check unknown, or an internal error.
	ExitNoEval = 3
	// ExitUsage: a usage error (unknown flag, command or argument, a bad value),
	// and nothing else (sysexits.h EX_USAGE).
	ExitUsage = 64
)
