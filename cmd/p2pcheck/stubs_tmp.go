package main

import "github.com/spf13/cobra"

type reportOptions struct{ global *globalOptions }

func (ro *reportOptions) addFlags(*cobra.Command)  {}
func (ro *reportOptions) run(*cobra.Command) error { return nil }
func newReportCommand(ro *reportOptions) *cobra.Command {
	return &cobra.Command{Use: "report"}
}
func newGdrCommand(o *globalOptions) *cobra.Command    { return &cobra.Command{Use: "gdr"} }
