package main

// `hostgate check ingress-nginx`: what hostgate would make of a cluster's
// ingress-nginx Ingresses, before anyone switches.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostgate/hostgate/watch"
)

// errLossy is check's answer when some Ingress would lose behaviour: the
// command exits 1, so that a script can stop a migration on it.
var errLossy = errors.New("some Ingresses would not be served as ingress-nginx serves them")

// runCheck runs `hostgate check ingress-nginx [flags]`, writing the
// report to out.
func runCheck(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "ingress-nginx" {
		return errors.New("usage: hostgate check ingress-nginx [-f FILE | --kubeconfig FILE] [--ingress-class LIST] [--enable-ssl-passthrough] [-o text|json]")
	}
	fs := flag.NewFlagSet("hostgate check ingress-nginx", flag.ContinueOnError)
	fs.SetOutput(out)
	file := fs.String("f", "", "read Ingresses from this YAML file (kubectl get ingress -A -o yaml > FILE), \"-\" for standard input, instead of a cluster")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster to read (default: $KUBECONFIG or ~/.kube/config, as kubectl)")
	classes := fs.String("ingress-class", "nginx", "comma-separated classes to check; Ingresses without a class are checked too")
	format := fs.String("o", "text", "output format: text or json")
	sslPassthrough := fs.Bool("enable-ssl-passthrough", false, "check as hostgate runs with --enable-ssl-passthrough (ingress-nginx's flag of that name): without it, the ssl-passthrough annotation is ignored")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("-o %q: must be text or json", *format)
	}
	ingresses, err := readCheckInput(ctx, *file, *kubeconfig)
	if err != nil {
		return err
	}
	checks := watch.CheckIngresses(ingresses, splitList(*classes), *sslPassthrough)
	if *format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(checks); err != nil {
			return err
		}
	} else {
		printChecks(out, checks)
	}
	if slices.ContainsFunc(checks, func(c watch.IngressCheck) bool { return !c.Lossless() }) {
		return errLossy
	}
	return nil
}

func readCheckInput(ctx context.Context, file, kubeconfig string) ([]*networkingv1.Ingress, error) {
	if file != "" {
		r := io.Reader(os.Stdin)
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r = f
		}
		ingresses, errs := watch.ReadIngresses(file, r)
		return ingresses, errors.Join(errs...)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := kube.NetworkingV1().Ingresses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Ingresses: %w", err)
	}
	ingresses := make([]*networkingv1.Ingress, len(list.Items))
	for i := range list.Items {
		ingresses[i] = &list.Items[i]
	}
	return ingresses, nil
}

// printChecks writes one block per Ingress and a summary by annotation.
func printChecks(out io.Writer, checks []watch.IngressCheck) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	byAnnotation := map[string]map[watch.Outcome]int{}
	lossy := 0
	for _, c := range checks {
		class := c.Class
		if class == "" {
			class = "none"
		}
		fmt.Fprintf(w, "Ingress %s (class %s)\n", c.Ingress, class)
		if len(c.Annotations) == 0 && len(c.Paths) == 0 {
			fmt.Fprintf(w, "  no ingress-nginx annotations\t\t\n")
		}
		for _, o := range c.Annotations {
			name := strings.TrimPrefix(o.Annotation, watch.NginxAnnotationPrefix)
			fmt.Fprintf(w, "  %s\t%s=%s\t%s\n", o.Outcome, name, shortValue(o.Value), o.Reason)
			if byAnnotation[name] == nil {
				byAnnotation[name] = map[watch.Outcome]int{}
			}
			byAnnotation[name][o.Outcome]++
		}
		for _, p := range c.Paths {
			fmt.Fprintf(w, "  not served\t%s\t\n", p)
		}
		if !c.Lossless() {
			lossy++
		}
	}
	w.Flush()
	fmt.Fprintf(out, "\n%d Ingresses checked; %d served as ingress-nginx serves them, %d not.\n", len(checks), len(checks)-lossy, lossy)
	if len(byAnnotation) == 0 {
		return
	}
	fmt.Fprintf(w, "\nannotation\thonoured\tignored\trefused\tinvalid\n")
	for _, name := range slices.Sorted(maps.Keys(byAnnotation)) {
		t := byAnnotation[name]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", name, t[watch.Honoured], t[watch.Ignored], t[watch.Refused], t[watch.Invalid])
	}
	w.Flush()
}

// shortValue quotes an annotation's value, cut to a line's worth.
func shortValue(v string) string {
	const max = 60
	q := fmt.Sprintf("%q", v)
	if len(q) > max {
		q = q[:max-4] + `..."`
	}
	return q
}
