// Command protobuf-schema writes the wire layout of the built-in Kubernetes kinds that opkit's client reads
// as protobuf (packages/runtime/src/client/protobuf/schema.generated.ts): for every message, its fields in Go
// declaration order (the order of the API server's JSON) with their JSON name, protobuf field number, type
// and the JSON encoder's rules (omitempty, pointer, slice, map, inline). It reads the Go types' `json` and
// `protobuf` struct tags, the two descriptions the API server itself encodes from.
//
//	cd packages/runtime/tools/protobuf-schema && go run . > ../../src/client/protobuf/schema.generated.ts
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The kinds opkit defines as built-in resources (packages/runtime/src/api/builtin.ts), by apiVersion/kind.
var kinds = map[string]any{
	"v1/ConfigMap":                                    corev1.ConfigMap{},
	"v1/Secret":                                       corev1.Secret{},
	"v1/Service":                                      corev1.Service{},
	"v1/Pod":                                          corev1.Pod{},
	"v1/PersistentVolumeClaim":                        corev1.PersistentVolumeClaim{},
	"v1/PersistentVolume":                             corev1.PersistentVolume{},
	"v1/Namespace":                                    corev1.Namespace{},
	"v1/Node":                                         corev1.Node{},
	"v1/ServiceAccount":                               corev1.ServiceAccount{},
	"apps/v1/StatefulSet":                             appsv1.StatefulSet{},
	"apps/v1/Deployment":                              appsv1.Deployment{},
	"policy/v1/PodDisruptionBudget":                   policyv1.PodDisruptionBudget{},
	"coordination.k8s.io/v1/Lease":                    coordinationv1.Lease{},
	"events.k8s.io/v1/Event":                          eventsv1.Event{},
	"storage.k8s.io/v1/StorageClass":                  storagev1.StorageClass{},
	"rbac.authorization.k8s.io/v1/Role":               rbacv1.Role{},
	"rbac.authorization.k8s.io/v1/ClusterRole":        rbacv1.ClusterRole{},
	"rbac.authorization.k8s.io/v1/RoleBinding":        rbacv1.RoleBinding{},
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": rbacv1.ClusterRoleBinding{},
	"v1/Status":                                       metav1.Status{},
}

// Types with their own encodings (JSON and protobuf differ from their Go structure).
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "time",
	reflect.TypeOf(metav1.MicroTime{}):     "microtime",
	reflect.TypeOf(metav1.Duration{}):      "duration",
	reflect.TypeOf(resource.Quantity{}):    "quantity",
	reflect.TypeOf(intstr.IntOrString{}):   "intstr",
	reflect.TypeOf(runtime.RawExtension{}): "raw",
	reflect.TypeOf(metav1.FieldsV1{}):      "fieldsv1",
}

var marshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// Field flags (schema-types.ts has the same).
const (
	omitEmpty = 1
	pointer   = 2
	slice     = 4
	isMap     = 8
	inline    = 16
	omitZero  = 32
)

// field: [json name, protobuf number, type, flags]; type is a scalar name, a special name or a message name.
type field [4]any

var messages = map[string][]field{}

func name(t reflect.Type) string {
	p := strings.TrimPrefix(t.PkgPath(), "k8s.io/")
	p = strings.TrimPrefix(strings.TrimPrefix(p, "api/"), "apimachinery/pkg/apis/")
	return strings.ReplaceAll(p, "/", ".") + "." + t.Name()
}

func typeOf(t reflect.Type) string {
	if s, ok := special[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int32, reflect.Int64, reflect.Int, reflect.Uint32, reflect.Uint64, reflect.Uint16, reflect.Int16:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Struct:
		if reflect.PointerTo(t).Implements(marshaler) || t.Implements(marshaler) {
			panic(fmt.Sprintf("%s has its own MarshalJSON: add it to special and to compile.ts", t))
		}
		return message(t)
	}
	panic(fmt.Sprintf("unsupported type %s", t))
}

func message(t reflect.Type) string {
	n := name(t)
	if _, done := messages[n]; done {
		return n
	}
	messages[n] = nil // recursion guard
	var fields []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		jsonTag := f.Tag.Get("json")
		if jsonTag == "-" {
			continue
		}
		parts := strings.Split(jsonTag, ",")
		pb := f.Tag.Get("protobuf")
		if pb == "" {
			if f.Anonymous && f.Type == reflect.TypeOf(metav1.TypeMeta{}) {
				continue // apiVersion and kind: the envelope's
			}
			panic(fmt.Sprintf("%s.%s has no protobuf tag", n, f.Name))
		}
		num, err := strconv.Atoi(strings.Split(pb, ",")[1])
		if err != nil {
			panic(err)
		}
		flags := 0
		if parts[0] == "" {
			if !f.Anonymous || f.Type.Kind() != reflect.Struct {
				panic(fmt.Sprintf("%s.%s: no JSON name and not an embedded struct", n, f.Name))
			}
			flags |= inline // encoding/json inlines an embedded struct without a name of its own
		}
		for _, o := range parts[1:] {
			if o == "omitempty" {
				flags |= omitEmpty
			}
			if o == "inline" && parts[0] != "" {
				panic(fmt.Sprintf("%s.%s: inline with a name (encoding/json ignores it)", n, f.Name))
			}
			if o == "omitzero" {
				flags |= omitZero
			}
		}
		ft := f.Type
		typ := ""
		switch {
		case ft.Kind() == reflect.Ptr:
			flags |= pointer
			typ = typeOf(ft.Elem())
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Uint8:
			typ = "bytes"
		case ft.Kind() == reflect.Slice:
			flags |= slice
			et := ft.Elem()
			if et.Kind() == reflect.Slice && et.Elem().Kind() == reflect.Uint8 {
				typ = "bytes"
			} else {
				typ = typeOf(et)
			}
		case ft.Kind() == reflect.Map:
			flags |= isMap
			if ft.Key().Kind() != reflect.String {
				panic(fmt.Sprintf("%s.%s: map key %s", n, f.Name, ft.Key()))
			}
			vt := ft.Elem()
			if vt.Kind() == reflect.Slice && vt.Elem().Kind() == reflect.Uint8 {
				typ = "bytes"
			} else {
				typ = typeOf(vt)
			}
		default:
			typ = typeOf(ft)
		}
		if flags&inline != 0 && !strings.Contains(typ, ".") {
			panic(fmt.Sprintf("%s.%s: inline %s", n, f.Name, typ))
		}
		// compile.ts honours omitzero on times only (a zero time is null); anything else needs it taught.
		if flags&omitZero != 0 && (flags&(pointer|slice|isMap) != 0 || (typ != "time" && typ != "microtime")) {
			panic(fmt.Sprintf("%s.%s: omitzero on %s", n, f.Name, typ))
		}
		fields = append(fields, field{parts[0], num, typ, flags})
	}
	messages[n] = fields
	return n
}

func main() {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	roots := map[string]string{}
	for _, k := range keys {
		roots[k] = message(reflect.TypeOf(kinds[k]))
	}
	// The list envelope of every kind is {metadata: ListMeta = 1, items = 2}.
	message(reflect.TypeOf(metav1.ListMeta{}))
	out, err := json.Marshal(map[string]any{"kinds": roots, "messages": messages})
	if err != nil {
		panic(err)
	}
	fmt.Println("// Generated by packages/runtime/tools/protobuf-schema (go run .) from k8s.io/api " + apiVersion() + ". Do not edit.")
	fmt.Println("import type { ProtobufSchema } from './schema-types.ts';")
	fmt.Println()
	fmt.Printf("export const SCHEMA: ProtobufSchema = %s;\n", out)
	fmt.Printf("export const SCHEMA_API_VERSION = %q;\n", apiVersion())
}

func apiVersion() string {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "k8s.io/api" {
			return f[1]
		}
	}
	panic("k8s.io/api not in go.mod")
}
