package watch

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// condition builds a status condition; the writer sets the transition time.
func condition[T, R ~string](typ T, ok bool, reason R, generation int64, message string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{
		Type:               string(typ),
		Status:             status,
		Reason:             string(reason),
		ObservedGeneration: generation,
		Message:            message,
	}
}

// setCondition replaces the condition of the same type in list, or appends.
func setCondition(list *[]metav1.Condition, c metav1.Condition) {
	for i := range *list {
		if (*list)[i].Type == c.Type {
			(*list)[i] = c
			return
		}
	}
	*list = append(*list, c)
}

// problem is a condition's reason and message, gathered while translating
// one object and turned into its conditions at the end. The zero value
// means no problem.
type problem struct {
	reason  string
	message string
}

func (p problem) ok() bool { return p.reason == "" }

// first keeps the first problem found: it is usually the cause of the rest.
func (p *problem) first(reason, message string) {
	if p.ok() {
		*p = problem{reason: reason, message: message}
	}
}
