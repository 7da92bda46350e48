// Command k8s holds, in one binary, the Kubernetes components the real-cluster tests run
// (as the old hyperkube did): the first argument names the component, the rest are its
// own flags, unchanged.
//
//	k8s etcd [etcd flags]                   etcd's own main (go.etcd.io/etcd/server/v3/etcdmain)
//	k8s kube-apiserver [flags]              k8s.io/kubernetes/cmd/kube-apiserver
//	k8s kube-scheduler [flags]              k8s.io/kubernetes/cmd/kube-scheduler
//	k8s kube-controller-manager [flags]     k8s.io/kubernetes/cmd/kube-controller-manager
//	k8s kube-proxy [flags]                  k8s.io/kubernetes/cmd/kube-proxy
//	k8s kubelet [flags]                     k8s.io/kubernetes/cmd/kubelet
//	k8s etcd-compact [-raw] ENDPOINT [REVISION]
//	                                        compacts etcd at REVISION (default: the current
//	                                        one) as kube-apiserver's compactor does, and
//	                                        prints "compacted <revision>"; -raw: compaction
//	                                        alone, as etcd's own auto-compaction does
//	k8s version                             the Kubernetes and etcd versions built in
//
// One binary per release links the shared packages once instead of four times. The same
// file is the main package of every release's module (k8s-1.34/, k8s-1.37/ link to it);
// each module's go.mod pins the release. Test tooling only: see ../README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
	_ "time/tzdata" // as kube-apiserver's own main: time zones for CronJob

	"github.com/spf13/cobra"
	etcdversion "go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // as the components' mains: --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // ... client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // ... the build-info metric
	"k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = "usage: k8s etcd|kube-apiserver|kube-scheduler|kube-controller-manager|kube-proxy|kubelet [flags] | etcd-compact [-raw] ENDPOINT [REVISION] | version"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, args...))
	case "kube-apiserver":
		runCobra(apiserver.NewAPIServerCommand(), args)
	case "kube-scheduler":
		runCobra(scheduler.NewSchedulerCommand(), args)
	case "kube-controller-manager":
		runCobra(controllermanager.NewControllerManagerCommand(), args)
	case "kube-proxy":
		runCobra(proxy.NewProxyCommand(), args)
	case "kubelet":
		runCobra(kubelet.NewKubeletCommand(context.Background()), args)
	case "etcd-compact":
		os.Exit(compact(args))
	case "version":
		fmt.Printf("kubernetes %s etcd %s\n", version.Get().GitVersion, etcdversion.Version)
	default:
		fmt.Fprintf(os.Stderr, "k8s: unknown component %q\n%s\n", name, usage)
		os.Exit(2)
	}
}

// runCobra runs a component's command as its own main does, on the arguments after the
// component's name (cobra would otherwise read os.Args[1:], the name included).
func runCobra(cmd *cobra.Command, args []string) {
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}

// compactRevKey is where kube-apiservers record the revision one of them compacted at
// (k8s.io/apiserver/pkg/storage/etcd3/compact.go); the others watch it, and the watch
// cache drops what the compaction removed only when it sees it there.
const compactRevKey = "compact_rev_key"

// compact compacts etcd's history so that a test can make the apiserver meet a compacted
// resourceVersion on demand (kube-apiserver's own compaction runs every 5 minutes). By
// default it follows kube-apiserver's compactor: compare-and-swap compactRevKey to the
// revision, then compact there, so the running apiserver learns of it as of a compaction
// by another apiserver of the cluster.
func compact(args []string) int {
	raw := len(args) > 0 && args[0] == "-raw"
	if raw {
		args = args[1:]
	}
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{args[0]}, DialTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-compact: connecting to %s: %v\n", args[0], err)
		return 1
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var revision int64
	if len(args) == 2 {
		if revision, err = strconv.ParseInt(args[1], 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "etcd-compact: bad revision %q\n", args[1])
			return 2
		}
	} else {
		status, err := client.Status(ctx, args[0])
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd-compact: status of %s: %v\n", args[0], err)
			return 1
		}
		revision = status.Header.Revision
	}
	if !raw {
		current, err := client.Get(ctx, compactRevKey)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd-compact: reading %s: %v\n", compactRevKey, err)
			return 1
		}
		var version int64
		if len(current.Kvs) > 0 {
			version = current.Kvs[0].Version
		}
		txn, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.Version(compactRevKey), "=", version)).
			Then(clientv3.OpPut(compactRevKey, strconv.FormatInt(revision, 10))).
			Commit()
		if err != nil || !txn.Succeeded {
			fmt.Fprintf(os.Stderr, "etcd-compact: recording the revision in %s failed (err %v); "+
				"did kube-apiserver's own compactor run at the same moment?\n", compactRevKey, err)
			return 1
		}
	}
	if _, err := client.Compact(ctx, revision, clientv3.WithCompactPhysical()); err != nil {
		fmt.Fprintf(os.Stderr, "etcd-compact: compacting at %d: %v\n", revision, err)
		return 1
	}
	fmt.Printf("compacted %d\n", revision)
	return 0
}
