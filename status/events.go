package status

// Events on Ingresses.
//
// An Ingress has no conditions, so what hostgate did with its
// ingress-nginx annotations reaches `kubectl describe ingress` as an
// Event: one when the Ingress is first seen with annotations that are not
// all honoured, and one each time that list changes. The writer remembers
// what it last said per Ingress; a new leader says it once more.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostgate/hostgate/watch"
)

// maxEventMessage is the API server's limit on an Event's message.
const maxEventMessage = 1024

// annotationEvent is the Event hostgate wants on an Ingress for the
// outcomes of its annotations, "" when all are honoured.
func annotationEvent(outcomes []watch.AnnotationOutcome) (reason, message string) {
	var lost []string
	for _, o := range outcomes {
		if o.Outcome != watch.Honoured {
			lost = append(lost, fmt.Sprintf("%s %s (%s)", strings.TrimPrefix(o.Annotation, watch.NginxAnnotationPrefix), o.Outcome, o.Reason))
		}
	}
	if len(lost) == 0 {
		return "", ""
	}
	message = fmt.Sprintf("%d of %d ingress-nginx annotations not honoured: %s", len(lost), len(outcomes), strings.Join(lost, "; "))
	if len(message) > maxEventMessage {
		message = message[:maxEventMessage-3] + "..."
	}
	return "AnnotationsNotHonoured", message
}

// emitAnnotationEvents posts an Event on each Ingress whose annotation
// outcomes changed since the last Event this writer posted for it.
//
// Only Ingresses with a message are remembered: an Ingress without one
// posts nothing whether remembered or not, and a map of every Ingress,
// made anew on every pass, was most of what a pass over 10,000 settled
// Ingresses allocated (BenchmarkSettledPass).
func (w *Writer) emitAnnotationEvents(ctx context.Context, ingresses []watch.IngressReport) {
	var seen map[types.UID]string
	for _, i := range ingresses {
		reason, message := annotationEvent(i.Annotations)
		if message == "" {
			continue
		}
		uid := i.Object.UID
		if seen == nil {
			seen = map[types.UID]string{}
		}
		seen[uid] = message
		if w.annotationEvents[uid] == message {
			continue
		}
		if err := w.postEvent(ctx, i.Object.Namespace, i.Object.Name, uid, reason, message); err != nil {
			if ctx.Err() == nil {
				w.log.Warn("posting event", "ingress", i.Object.Namespace+"/"+i.Object.Name, "error", err)
			}
			// Not remembered: the next pass tries again.
			delete(seen, uid)
		}
	}
	w.annotationEvents = seen
}

func (w *Writer) postEvent(ctx context.Context, namespace, name string, uid types.UID, reason, message string) error {
	now := metav1.NewTime(time.Now())
	_, err := w.kube.CoreV1().Events(namespace).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + ".", Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Namespace: namespace, Name: name, UID: uid,
		},
		Reason: reason, Message: message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "hostgate"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "hostgate.dev/ingress-controller", ReportingInstance: w.opts.Identity,
	}, metav1.CreateOptions{})
	return err
}
