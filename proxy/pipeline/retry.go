package pipeline

// Retries under a rule's retry policy (router.Retry), decided here for
// every engine: sendH1 makes them for the HTTP/1.1 engine and the bridge,
// forwarder.retryRoundTrip for net/http's ReverseProxy.
//
// What is sent again, up to the policy's attempts:
//   - a request without a body whose answer has one of the policy's codes;
//   - a request that failed to connect (within an attempt that already
//     moved to other endpoints, ConnectAttempts): nothing of it was sent;
//   - a request safe to send again (repeatable, without a body) that failed
//     otherwise: a reset, or no answer within timeouts.backendRequest. The
//     backend may have processed it, so, unlike the codes, only such
//     requests are retried after such failures.
//
// A request body is streamed, never held, so a request whose body went to
// the backend is not sent twice, whatever the answer: keeping bodies to
// send again would cost memory per request and a wait for the whole body
// before the first attempt.
//
// timeouts.request bounds the whole request, attempts and the waits between
// them included; timeouts.backendRequest bounds each attempt, from its start
// to the end of its response. A retry that could not start before the
// request's deadline is not made, and the last answer stands.
//
// A retry picks its endpoint anew, which may be the one that failed.
//
// The policy's budget (nginx's proxy_next_upstream_timeout) bounds, from
// the request's start, when a request may still go to another endpoint:
// a retry, or a move after a failed connect. As in nginx it decides only
// whether another try starts; the attempt under way keeps its own
// timeouts.

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hostgate/hostgate/router"
)

// maxBackoffFactor caps the waits, which double from the policy's backoff,
// at that many times it (Envoy's cap).
const maxBackoffFactor = 10

// applyPolicies sets the request's deadline, and its first attempt's,
// from the rule's timeouts and the call's grpc-timeout, and takes the
// rule's retry policy.
func (ex *exchange) applyPolicies(h router.Headers) {
	rule := ex.plan.target.Rule
	if d := requestTimeout(rule.Timeouts, h); d > 0 {
		ex.deadline = ex.start.Add(d)
	}
	if r := rule.Retry; r != nil {
		if r.Attempts > 0 {
			ex.retry = r
		}
		if r.Budget > 0 {
			ex.moveWithin = r.Budget
		}
	}
	ex.startAttempt(ex.start)
}

// requestTimeout is how long the whole request may take: the rule's
// request timeout, or a gRPC call's grpc-timeout when shorter.
func requestTimeout(t router.Timeouts, h router.Headers) time.Duration {
	d := t.Request
	if g, ok := grpcTimeout(h); ok && isGRPC(h) && (d == 0 || g < d) {
		d = g
	}
	return d
}

// startAttempt sets the deadline of an attempt that starts at now: the
// rule's backend request timeout from now, within the request's deadline.
func (ex *exchange) startAttempt(now time.Time) {
	ex.attemptDeadline = ex.deadline
	if b := ex.plan.target.Rule.Timeouts.BackendRequest; b > 0 && (ex.deadline.IsZero() || now.Add(b).Before(ex.deadline)) {
		ex.attemptDeadline = now.Add(b)
	}
}

// clientDeadline bounds what is not one attempt's, the client's side of
// the request (its body read, ReverseProxy's context): the only attempt's
// deadline, or the request's when a retry policy may make more attempts.
// A client socket past its read deadline looks closed (clientGone), so it
// must not end before the request does.
func (ex *exchange) clientDeadline() time.Time {
	if ex.retry != nil {
		return ex.deadline
	}
	return ex.attemptDeadline
}

// retryAfter says whether the attempt just made, answered with status or
// failed with err, is made again, and how long to wait first; it counts
// the retry. bodiless says the request has no body, replayable that it has
// none and is safe to send twice. The caller has made sure the client is
// still there.
func (ex *exchange) retryAfter(status int, err error, bodiless, replayable bool) (time.Duration, bool) {
	p := ex.retry
	if p == nil || ex.retries >= p.Attempts {
		return 0, false
	}
	_, clientErr := errors.AsType[ClientBodyError](err)
	switch {
	case err == nil:
		if !bodiless || !slices.Contains(p.Codes, status) {
			return 0, false
		}
	case clientErr || !isConnectError(err) && !replayable:
		return 0, false
	}
	wait := backoff(p.Backoff, ex.retries)
	then := time.Now().Add(wait)
	if !ex.deadline.IsZero() && !then.Before(ex.deadline) || !ex.mayMove(then) {
		return 0, false
	}
	ex.retries++
	ex.stats.retried()
	return wait, true
}

// mayMove reports whether a try of another endpoint may start at t,
// within the policy's budget.
func (ex *exchange) mayMove(t time.Time) bool {
	return ex.moveWithin == 0 || t.Sub(ex.start) < ex.moveWithin
}

// backoff is the wait before retry n (from 0): base doubled n times, at
// most maxBackoffFactor times base, and drawn between half of that and all
// of it, so that requests that failed together do not come back together.
func backoff(base time.Duration, n int) time.Duration {
	d := min(base<<min(n, 4), maxBackoffFactor*base)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d, or until done closes, and reports whether d passed.
func sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
