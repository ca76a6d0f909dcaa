package pipeline

// The pace of answers under a rule's ResponseRate (ingress-nginx's
// limit-rate and limit-rate-after, nginx's limit_rate): the backend's
// body is read no faster than the rule lets it go to the client, so the
// client gets it at that pace through the server's write buffers.
//
// Only net/http's server paces: the native HTTP/1.1 engine and the bridge
// hand a rule with a ResponseRate over (engineForwards), as they do one
// with external authorization, so every protocol is paced by this one
// reader, and rules without pay one pointer test there and in
// modifyResponse. As nginx with proxy_buffering off, the backend's
// connection stays busy while the answer trickles out.

import (
	"context"
	"io"
	"time"

	"github.com/hostgate/hostgate/router"
)

// ratedBody is a backend's answer body read at most at rate: by now,
// rate.After bytes and then BytesPerSecond for each second since start,
// plus one second's worth (nginx lets that much go at once).
type ratedBody struct {
	io.ReadCloser
	rate  *router.ResponseRate
	start time.Time
	read  int64
	// done ends a wait when the request ends.
	done <-chan struct{}
}

func rateBody(ctx context.Context, body io.ReadCloser, rate *router.ResponseRate, start time.Time) *ratedBody {
	return &ratedBody{ReadCloser: body, rate: rate, start: start, done: ctx.Done()}
}

// allowance is how many more bytes may be read at now.
func (b *ratedBody) allowance(now time.Time) int64 {
	perSecond := float64(b.rate.BytesPerSecond)
	// In floating point: rate × nanoseconds overflows int64 within hours.
	earned := perSecond * (now.Sub(b.start).Seconds() + 1)
	return b.rate.After + int64(min(earned, 1<<62)) - b.read
}

func (b *ratedBody) Read(p []byte) (int, error) {
	left := b.allowance(time.Now())
	if left <= 0 {
		// Wait for at least a tenth of a second's worth, so that a
		// slow rate does not mean a wake-up per byte.
		want := max(-left, 0) + max(b.rate.BytesPerSecond/10, 1)
		wait := time.Duration(float64(want) / float64(b.rate.BytesPerSecond) * float64(time.Second))
		if !sleep(wait, b.done) {
			return 0, context.Canceled
		}
		left = b.allowance(time.Now())
	}
	if int64(len(p)) > left {
		p = p[:max(left, 1)]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	return n, err
}
