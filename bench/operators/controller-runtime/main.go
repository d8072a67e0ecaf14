// The Database operator written the kubebuilder way on controller-runtime: the benchmark's Go peer of
// opkit's Database operator (operators/database). Same flags as opkit's entry point.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(SchemeBuilder.AddToScheme(scheme))
}

func main() {
	var metricsAddr, probeAddr string
	var enableLeaderElection bool
	var workers int
	var syncPeriod time.Duration
	var contentType string
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "The address the metrics endpoint binds to.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false, "Enable leader election.")
	flag.IntVar(&workers, "max-concurrent-reconciles", 1, "Databases reconciled in parallel (controller-runtime's default: 1).")
	flag.DurationVar(&syncPeriod, "sync-period", 10*time.Hour, "How often every cached object is reconciled again (controller-runtime's default: 10h).")
	flag.StringVar(&contentType, "content-type", "", "The wire format for built-in kinds: \"\" is controller-runtime's default (protobuf for built-in kinds, JSON for custom resources); application/json makes every request and watch JSON, as opkit's are.")
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime's config package
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	if contentType != "" && contentType != "application/json" {
		setupLog.Error(fmt.Errorf("--content-type %q: only \"\" (controller-runtime's default) or application/json", contentType), "bad flag")
		os.Exit(2)
	}
	cfg := ctrl.GetConfigOrDie()
	if contentType != "" {
		cfg.ContentType = contentType
		cfg.AcceptContentTypes = contentType
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{SyncPeriod: &syncPeriod},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         enableLeaderElection,
		LeaderElectionID:       "database-operator-go.myapp.example.com",
	})
	if err != nil {
		setupLog.Error(err, "unable to create manager")
		os.Exit(1)
	}

	r := &DatabaseReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Recorder:  mgr.GetEventRecorder("database-operator"),
	}
	if err := r.SetupWithManager(mgr, workers); err != nil {
		setupLog.Error(err, "unable to create controller", "controller", "Database")
		os.Exit(1)
	}

	// Ready once the informers of every watched kind have synced (like opkit's /readyz). The informers are
	// requested up front so that WaitForCacheSync covers all of them.
	ctx := ctrl.SetupSignalHandler()
	objs := []client.Object{&Database{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{},
		&corev1.ConfigMap{}, &policyv1.PodDisruptionBudget{}, &corev1.Pod{}, &corev1.PersistentVolumeClaim{},
		&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
	for _, o := range objs {
		if _, err := mgr.GetCache().GetInformer(ctx, o); err != nil {
			setupLog.Error(err, "unable to get informer")
			os.Exit(1)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		c, cancel := context.WithTimeout(req.Context(), 5*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(c) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		setupLog.Error(err, "unable to set up ready check")
		os.Exit(1)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}
