// Package render writes p2pcheck's results for people and programs: the PCIe tree,
// pair verdicts and the topology matrix as text or JSON, and the node report as
// text, JSON, a Prometheus textfile and node-feature-discovery labels.
//
// Renderers take values that were computed elsewhere and do no I/O of their own
// beyond the writer they are given.
package render
