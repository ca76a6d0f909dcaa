package watch

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cachedMeta is the metadata that the types of our own the store holds
// (endpointSlice, service) keep of an object: its namespace, name,
// resource version and creation time, what informers and the store key,
// compare and order objects by. Embedded, it makes them a metav1.Object,
// which client-go's key function and the store read objects through; the
// setters of what it does not keep do nothing, and it has no labels or
// annotations (what translation reads of those is a field of the type).
type cachedMeta struct {
	Namespace, Name, ResourceVersion string
	CreationTimestamp                metav1.Time
}

func newCachedMeta(m *metav1.ObjectMeta) cachedMeta {
	return cachedMeta{Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp}
}

func (m *cachedMeta) GetNamespace() string                  { return m.Namespace }
func (m *cachedMeta) SetNamespace(namespace string)         { m.Namespace = namespace }
func (m *cachedMeta) GetName() string                       { return m.Name }
func (m *cachedMeta) SetName(name string)                   { m.Name = name }
func (m *cachedMeta) GetResourceVersion() string            { return m.ResourceVersion }
func (m *cachedMeta) SetResourceVersion(version string)     { m.ResourceVersion = version }
func (m *cachedMeta) GetCreationTimestamp() metav1.Time     { return m.CreationTimestamp }
func (m *cachedMeta) SetCreationTimestamp(time metav1.Time) { m.CreationTimestamp = time }

func (*cachedMeta) GetGenerateName() string                       { return "" }
func (*cachedMeta) SetGenerateName(string)                        {}
func (*cachedMeta) GetUID() types.UID                             { return "" }
func (*cachedMeta) SetUID(types.UID)                              {}
func (*cachedMeta) GetGeneration() int64                          { return 0 }
func (*cachedMeta) SetGeneration(int64)                           {}
func (*cachedMeta) GetSelfLink() string                           { return "" }
func (*cachedMeta) SetSelfLink(string)                            {}
func (*cachedMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (*cachedMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (*cachedMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (*cachedMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (*cachedMeta) GetLabels() map[string]string                  { return nil }
func (*cachedMeta) SetLabels(map[string]string)                   {}
func (*cachedMeta) GetAnnotations() map[string]string             { return nil }
func (*cachedMeta) SetAnnotations(map[string]string)              {}
func (*cachedMeta) GetFinalizers() []string                       { return nil }
func (*cachedMeta) SetFinalizers([]string)                        {}
func (*cachedMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (*cachedMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (*cachedMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (*cachedMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// deepCopied returns a copy of s whose elements share nothing with those
// of s, by the API types' generated DeepCopyInto; nil stays nil.
func deepCopied[T any, P interface {
	*T
	DeepCopyInto(P)
}](s []T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i := range s {
		P(&s[i]).DeepCopyInto(&out[i])
	}
	return out
}
