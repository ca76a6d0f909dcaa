// Package streamtest is test support only: the long-lived streams that
// tests open through hostgate (a gRPC echo service spoken with a raw codec,
// so it needs no generated code, and a WebSocket echo with just enough
// framing for short text frames) and their clients. It must never be
// imported by non-test code.
package streamtest
