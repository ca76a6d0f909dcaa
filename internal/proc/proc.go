// Package proc starts the helper processes of tests and of the conformance
// runner (a control plane, hostgate, echo servers) so that the kernel kills
// them when the process that started them dies without cleaning up. It is
// for tests and test tooling only.
package proc
