// Command slice-anchor publishes a set of ResourceSlices with the upstream
// ResourceSlice controller (k8s.io/dynamic-resource-allocation/resourceslice)
// so the Python controller's publishing can be compared with it on the same
// apiserver in the same run. It reads the slices our slice builder wants
// (JSON: {"driver": "...", "pools": {"<pool>": [<ResourceSlice>, ...]}}),
// keeps each slice's devices and counters, and lets the upstream controller
// name, write and compare them. The upstream Pool has one node selection for
// the whole pool, so every pool is published for all nodes.
//
// It prints one JSON object per phase on stdout: publish (cold, until every
// slice is created), noop (Update with the same resources, until every pool
// was synced again), remove (until every slice is deleted). The publish phase
// also gives the memory the controller holds once every slice is created: the
// Go heap in use after a forced collection, and the resident size then. The
// harness drops its own copies of the input first (the controller keeps a
// deep copy of what it is given), so neither counts them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

type input struct {
	Driver string                                 `json:"driver"`
	Pools  map[string][]resourceapi.ResourceSlice `json:"pools"`
}

// countingQueue counts finished work items, so the caller knows when every
// pool queued by Update has been synced.
type countingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	done atomic.Int64
}

func (q *countingQueue) Done(item string) {
	q.TypedRateLimitingInterface.Done(item)
	q.done.Add(1)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	slicesPath := flag.String("slices", "", "JSON file of the desired slices")
	noopRounds := flag.Int("noop-rounds", 3, "Update calls with unchanged resources")
	qps := flag.Float64("qps", -1, "client QPS; negative: no client-side rate limit")
	burst := flag.Int("burst", 0, "client burst (with a positive -qps)")
	flag.Parse()
	if err := run(*kubeconfig, *slicesPath, *noopRounds, float32(*qps), *burst); err != nil {
		fmt.Fprintln(os.Stderr, "slice-anchor:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, slicesPath string, noopRounds int, qps float32, burst int) error {
	driver, resources, total, err := load(slicesPath)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	queue := &countingQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(
		workqueue.DefaultTypedControllerRateLimiter[string]())}
	syncDelay := time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: driver,
		KubeClient: client,
		Resources:  resources,
		Queue:      queue,
		SyncDelay:  &syncDelay,
	})
	if err != nil {
		return err
	}
	defer ctrl.Stop()
	// The controller deep-copied the resources; the harness's copy is not its memory.
	resources = nil
	waitFor(func() bool { return ctrl.GetStats().NumCreates >= int64(total) })
	took, cpu, stats := time.Since(start), cpuSeconds(), ctrl.GetStats()
	heap, rss := memoryAfterGC()
	emit("publish", took, cpu, stats, map[string]any{
		"slices": total, "heap_inuse_bytes": heap, "rss_bytes": rss,
	})

	// Let the informer's own follow-up syncs of the new slices run out first.
	settle(queue, 3*syncDelay)
	_, resources, _, err = load(slicesPath)
	if err != nil {
		return err
	}
	before := ctrl.GetStats()
	start = time.Now()
	for range noopRounds {
		done := queue.done.Load()
		ctrl.Update(resources)
		waitFor(func() bool { return queue.done.Load()-done >= int64(len(resources.Pools)) })
	}
	after := ctrl.GetStats()
	emit("noop", time.Since(start), cpuSeconds(), after, map[string]any{
		"syncs":  noopRounds * len(resources.Pools),
		"writes": after.NumCreates + after.NumUpdates + after.NumDeletes - before.NumCreates - before.NumUpdates - before.NumDeletes,
	})

	start = time.Now()
	ctrl.Update(&resourceslice.DriverResources{})
	waitFor(func() bool { return ctrl.GetStats().NumDeletes >= int64(total) })
	emit("remove", time.Since(start), cpuSeconds(), ctrl.GetStats(), nil)
	return nil
}

// load reads the desired slices; the file's bytes and its decoded form stay
// inside, so only the returned resources outlive the call.
func load(slicesPath string) (string, *resourceslice.DriverResources, int, error) {
	raw, err := os.ReadFile(slicesPath)
	if err != nil {
		return "", nil, 0, fmt.Errorf("-slices: %w", err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", nil, 0, fmt.Errorf("-slices %s: %w", slicesPath, err)
	}
	resources, total := driverResources(in)
	return in.Driver, resources, total, nil
}

// memoryAfterGC is the Go heap in use after a forced collection, and the
// resident size once freed memory has been returned to the kernel.
func memoryAfterGC() (uint64, int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, rssBytes()
}

func driverResources(in input) (*resourceslice.DriverResources, int) {
	out := &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	total := 0
	for name, slices := range in.Pools {
		pool := resourceslice.Pool{AllNodes: true}
		for _, s := range slices {
			pool.Slices = append(pool.Slices, resourceslice.Slice{
				Devices:        s.Spec.Devices,
				SharedCounters: s.Spec.SharedCounters,
			})
		}
		total += len(pool.Slices)
		out.Pools[name] = pool
	}
	return out, total
}

func waitFor(done func() bool) {
	for !done() {
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until no work item finished for `quiet`.
func settle(q *countingQueue, quiet time.Duration) {
	last, since := q.done.Load(), time.Now()
	for time.Since(since) < quiet || q.Len() > 0 {
		time.Sleep(50 * time.Millisecond)
		if n := q.done.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

func emit(phase string, took time.Duration, cpu float64, stats resourceslice.Stats, extra map[string]any) {
	out := map[string]any{
		"phase":       phase,
		"seconds":     took.Seconds(),
		"creates":     stats.NumCreates,
		"updates":     stats.NumUpdates,
		"deletes":     stats.NumDeletes,
		"cpu_seconds": cpu,
	}
	for k, v := range extra {
		out[k] = v
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func rssBytes() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
