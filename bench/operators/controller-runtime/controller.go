package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"
	labelRole      = "myapp.example.com/role"
	managedBy      = "opkit-database-operator"
	finalizerName  = "myapp.example.com/finalizer"
)

// DatabaseReconciler reconciles a Database object.
type DatabaseReconciler struct {
	client.Client
	// APIReader reads around the cache, like opkit's check for existing data before new passwords.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
}

func (r *DatabaseReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	podToDatabase := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[labelManagedBy] != managedBy || l[labelInstance] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[labelInstance]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&Database{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
			},
		}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&corev1.Pod{}, podToDatabase).
		Watches(&corev1.PersistentVolumeClaim{}, podToDatabase).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("database").
		Complete(r)
}

// event records an Event about the Database; related is the child it concerns (as opkit's operator does),
// which is part of client-go's aggregation key, so events about different children are not merged.
func (r *DatabaseReconciler) event(db *Database, related runtime.Object, typ, reason, action, note string, args ...any) {
	r.Recorder.Eventf(db, related, typ, reason, action, note, args...)
}

// createOrUpdate is controllerutil.CreateOrUpdate with the controller reference set, plus an event.
func (r *DatabaseReconciler) createOrUpdate(ctx context.Context, db *Database, obj client.Object, mutate func() error) error {
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		if err := mutate(); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(db, obj, r.Scheme)
	})
	if err != nil {
		return err
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	switch op {
	case controllerutil.OperationResultCreated:
		r.event(db, obj, corev1.EventTypeNormal, "Created", "Create", "created %s %s", kind, obj.GetName())
	case controllerutil.OperationResultUpdated:
		r.event(db, obj, corev1.EventTypeNormal, "Updated", "Update", "updated %s %s", kind, obj.GetName())
	}
	return nil
}

// deleteIfExists deletes an owned child that should no longer exist (read-only Service, PDB at 1 replica).
func (r *DatabaseReconciler) deleteIfExists(ctx context.Context, obj client.Object) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(r.Delete(ctx, obj))
}

func mergeMap(dst map[string]string, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

func (r *DatabaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	db := &Database{}
	if err := r.Get(ctx, req.NamespacedName, db); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	applyDefaults(db)
	d, err := newDesired(db)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}

	if !db.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(db, finalizerName) {
			if err := r.deleteData(ctx, db, d); err != nil {
				return ctrl.Result{}, err
			}
			controllerutil.RemoveFinalizer(db, finalizerName)
			if err := r.Update(ctx, db); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		return ctrl.Result{}, nil
	}
	wantFinalizer := db.Spec.DeletionPolicy == "Delete"
	if wantFinalizer != controllerutil.ContainsFinalizer(db, finalizerName) {
		if wantFinalizer {
			controllerutil.AddFinalizer(db, finalizerName)
		} else {
			controllerutil.RemoveFinalizer(db, finalizerName)
		}
		if err := r.Update(ctx, db); err != nil {
			return ctrl.Result{}, err
		}
	}

	// Credentials: created once; afterwards only missing keys are added, present ones never touched.
	secret := &corev1.Secret{}
	err = r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: d.names.secret}, secret)
	switch {
	case apierrors.IsNotFound(err):
		// Like opkit: never new passwords for data initialized with the old ones. The claim is read from
		// the API server (the cache may lag), once per Database whose Secret does not exist yet.
		for _, t := range d.sts.Spec.VolumeClaimTemplates {
			pvc := &corev1.PersistentVolumeClaim{}
			key := client.ObjectKey{Namespace: db.Namespace, Name: t.Name + "-" + d.sts.Name + "-0"}
			err := r.APIReader.Get(ctx, key, pvc)
			if err == nil && pvc.DeletionTimestamp.IsZero() {
				return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("credentials Secret %s is missing but claim %s holds data", d.names.secret, key.Name))
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		}
		secret = d.credentialsSecret()
		// Like opkit: under Retain the Secret outlives the Database, together with the data it unlocks.
		if db.Spec.DeletionPolicy == "Delete" {
			if err := controllerutil.SetControllerReference(db, secret, r.Scheme); err != nil {
				return ctrl.Result{}, err
			}
		}
		if err := r.Create(ctx, secret); err != nil {
			return ctrl.Result{}, err
		}
		r.event(db, secret, corev1.EventTypeNormal, "Created", "Create", "created Secret %s", secret.Name)
	case err != nil:
		return ctrl.Result{}, err
	default:
		want := d.credentialsSecret()
		patch := client.MergeFrom(secret.DeepCopy())
		changed := false
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		for k, v := range want.Data {
			if _, ok := secret.Data[k]; !ok {
				secret.Data[k] = v
				changed = true
			}
		}
		// Like opkit: the derived keys (SCRAM verifiers) follow the passwords the Secret holds.
		derived := map[string][]byte{}
		for k, v := range secret.Data {
			derived[k] = v
		}
		d.derive(derived)
		for _, k := range d.tpl.DerivedKeys {
			if v, ok := derived[k.Key]; ok && string(secret.Data[k.Key]) != string(v) {
				secret.Data[k.Key] = v
				changed = true
			}
		}
		if changed {
			if err := r.Patch(ctx, secret, patch); err != nil {
				return ctrl.Result{}, err
			}
		}
	}

	// postgres: the CA, the server certificate and <name>-app (tls.go).
	if d.tpl.TLS != nil {
		if err := r.ensureTLS(ctx, db, d, secret); err != nil {
			return ctrl.Result{}, err
		}
	}

	cm := d.configMap()
	current := &corev1.ConfigMap{ObjectMeta: cm.ObjectMeta}
	if err := r.createOrUpdate(ctx, db, current, func() error {
		current.Labels = mergeMap(current.Labels, cm.Labels)
		current.Data = cm.Data
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}

	services := []*corev1.Service{d.headlessService(), d.readWriteService()}
	if ro := d.readOnlyService(); ro != nil {
		services = append(services, ro)
	} else if err := r.deleteIfExists(ctx, &corev1.Service{ObjectMeta: d.meta(d.names.readOnly, "")}); err != nil {
		return ctrl.Result{}, err
	}
	for _, want := range services {
		svc := &corev1.Service{ObjectMeta: want.ObjectMeta}
		if err := r.createOrUpdate(ctx, db, svc, func() error {
			svc.Labels = mergeMap(svc.Labels, want.Labels)
			if !equality.Semantic.DeepDerivative(want.Spec, svc.Spec) {
				// Keep what the API server allocated (cluster IPs, node ports).
				ip, ips := svc.Spec.ClusterIP, svc.Spec.ClusterIPs
				svc.Spec = want.Spec
				if want.Spec.ClusterIP == "" {
					svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, ips
				}
			}
			return nil
		}); err != nil {
			return ctrl.Result{}, err
		}
	}

	wantSts := d.statefulSet()
	sts := &appsv1.StatefulSet{ObjectMeta: wantSts.ObjectMeta}
	if err := r.createOrUpdate(ctx, db, sts, func() error {
		sts.Labels = mergeMap(sts.Labels, wantSts.Labels)
		if sts.CreationTimestamp.IsZero() {
			sts.Spec = wantSts.Spec
			return nil
		}
		sts.Spec.Replicas = wantSts.Spec.Replicas
		if !equality.Semantic.DeepDerivative(wantSts.Spec.Template, sts.Spec.Template) {
			sts.Spec.Template = wantSts.Spec.Template
		}
		sts.Spec.UpdateStrategy = wantSts.Spec.UpdateStrategy
		if wantSts.Spec.PersistentVolumeClaimRetentionPolicy != nil {
			sts.Spec.PersistentVolumeClaimRetentionPolicy = wantSts.Spec.PersistentVolumeClaimRetentionPolicy
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}

	for _, name := range []string{d.names.pdb, d.names.pdb + "-primary"} {
		if pdb := d.podDisruptionBudget(name); pdb != nil {
			current := &policyv1.PodDisruptionBudget{ObjectMeta: pdb.ObjectMeta}
			if err := r.createOrUpdate(ctx, db, current, func() error {
				current.Labels = mergeMap(current.Labels, pdb.Labels)
				if !equality.Semantic.DeepDerivative(pdb.Spec, current.Spec) {
					current.Spec = pdb.Spec
				}
				return nil
			}); err != nil {
				return ctrl.Result{}, err
			}
		} else if err := r.deleteIfExists(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: d.meta(name, "")}); err != nil {
			return ctrl.Result{}, err
		}
	}

	// The primary lease's objects: created once (a concurrent reconcile may have created them first).
	// As opkit: the ServiceAccount, Role and RoleBinding read from the cache (owned, watched), the Lease
	// read live (opkit reads it fresh each time, never watching it: its holder renews it every 2 s).
	for _, want := range d.createOnly {
		var err error
		switch want.GetKind() {
		case "ServiceAccount":
			err = r.Get(ctx, client.ObjectKeyFromObject(want), &corev1.ServiceAccount{})
		case "Role":
			err = r.Get(ctx, client.ObjectKeyFromObject(want), &rbacv1.Role{})
		case "RoleBinding":
			err = r.Get(ctx, client.ObjectKeyFromObject(want), &rbacv1.RoleBinding{})
		default:
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(want.GroupVersionKind())
			err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), live)
		}
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		obj := want.DeepCopy()
		if err := controllerutil.SetControllerReference(db, obj, r.Scheme); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, err
		}
		r.event(db, obj, corev1.EventTypeNormal, "Created", "Create", "created %s %s", obj.GetKind(), obj.GetName())
	}

	// Role labels on the pods: the designated primary (status.targetPrimary, like opkit; <name>-0 until
	// recorded otherwise) or, without a cluster record, ordinal 0.
	targetPrimary := ""
	if d.tpl.ClusterRecord {
		targetPrimary = db.Status.TargetPrimary
		if targetPrimary == "" {
			targetPrimary = d.names.statefulSet + "-0"
		}
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(db.Namespace), client.MatchingLabels(d.selectorLabels())); err != nil {
		return ctrl.Result{}, err
	}
	// As opkit: one RoleAssigned Event per reconcile that changed labels, naming each change.
	var assigned []string
	for i := range pods.Items {
		p := &pods.Items[i]
		ord, ok := podOrdinal(d.names.statefulSet, p.Name)
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		role := "replica"
		if (targetPrimary == "" && ord == 0) || p.Name == targetPrimary {
			role = "primary"
		}
		if was := p.Labels[labelRole]; was != role {
			patch := client.MergeFrom(p.DeepCopy())
			p.Labels = mergeMap(p.Labels, map[string]string{labelRole: role})
			err := r.Patch(ctx, p, patch)
			if client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			if err == nil {
				note := p.Name + " is " + role
				if was != "" {
					note += " (was " + was + ")"
				}
				assigned = append(assigned, note)
			}
		}
	}
	if len(assigned) > 0 {
		r.event(db, nil, corev1.EventTypeNormal, "RoleAssigned", "Label", "%s", strings.Join(assigned, ", "))
	}

	// Status from the real children, written only when it changed.
	o := &observed{
		statefulSet:     sts,
		pods:            pods.Items,
		statefulSetName: d.names.statefulSet,
		secretName:      d.names.secret,
		endpoints:       d.endpoints(),
		selector:        d.selectorString(),
		targetPrimary:   targetPrimary,
	}
	if targetPrimary != "" {
		o.instances = instanceStatuses(d.names.statefulSet, replicasOf(db), targetPrimary, pods.Items)
	}
	status := computeStatus(db, o)
	// As opkit: InstanceReady / InstanceNotReady from the previous status.instances to the new one.
	for _, e := range instanceEvents(db.Status.Instances, status.Instances, targetPrimary) {
		r.event(db, nil, e.typ, e.reason, "Observe", "%s", e.note)
	}
	if !equality.Semantic.DeepEqual(status, db.Status) {
		patch := client.MergeFrom(db.DeepCopy())
		db.Status = status
		if err := r.Status().Patch(ctx, db, patch); err != nil {
			return ctrl.Result{}, err
		}
		log.V(1).Info("status updated", "phase", status.Phase)
	}
	return ctrl.Result{}, nil
}

func (r *DatabaseReconciler) deleteData(ctx context.Context, db *Database, d *desired) error {
	sts := &appsv1.StatefulSet{ObjectMeta: d.meta(d.names.statefulSet, "")}
	if err := r.deleteIfExists(ctx, sts); err != nil {
		return err
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, pvcs, client.InNamespace(db.Namespace), client.MatchingLabels(d.selectorLabels())); err != nil {
		return err
	}
	for i := range pvcs.Items {
		if err := r.Delete(ctx, &pvcs.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func podOrdinal(sts, pod string) (int, bool) {
	if !strings.HasPrefix(pod, sts+"-") {
		return 0, false
	}
	n, err := strconv.Atoi(pod[len(sts)+1:])
	return n, err == nil && n >= 0
}
