package main

// The desired children of a Database. The engine content (configuration files, scripts, probes, the
// whole pod template) is rendered from opkit's builders into templates.json by ../gen-templates.ts and
// embedded here, the way Go operators embed their manifests and config templates (go:embed); this file
// substitutes the Database's name and namespace, computes the config hash and generates the passwords.

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

//go:embed templates.json
var templatesJSON []byte

type template struct {
	Children         []json.RawMessage `json:"children"`
	PasswordKeys     []string          `json:"passwordKeys"`
	DerivedKeys      []derivedKey      `json:"derivedKeys"`
	ScramIterations  int               `json:"scramIterations"`
	UnhashedKeys     []string          `json:"unhashedKeys"`
	ClusterRecord    bool              `json:"clusterRecord"`
	PasswordLength   int               `json:"passwordLength"`
	PasswordAlphabet string            `json:"passwordAlphabet"`
	Endpoints        Endpoints         `json:"endpoints"`
	Selector         string            `json:"selector"`
	SecretName       string            `json:"secretName"`
	StatefulSetName  string            `json:"statefulSetName"`
	TLS              *tlsTemplate      `json:"tls"`
}

var templates struct {
	Placeholders struct {
		Name       string `json:"name"`
		Namespace  string `json:"namespace"`
		ConfigHash string `json:"configHash"`
		Password   string `json:"password"`
	} `json:"placeholders"`
	Templates map[string]json.RawMessage `json:"templates"`
}

func init() {
	if err := json.Unmarshal(templatesJSON, &templates); err != nil {
		panic(err)
	}
}

// derivedKey: a Secret key derived from a password (postgres: its SCRAM verifier).
type derivedKey struct {
	Key         string `json:"key"`
	UsernameKey string `json:"usernameKey"`
	PasswordKey string `json:"passwordKey"`
}

type childNames struct {
	statefulSet, headless, readWrite, readOnly, secret, configMap, pdb string
}

type desired struct {
	db       *Database
	names    childNames
	tpl      template
	secret   *corev1.Secret
	cm       *corev1.ConfigMap
	services map[string]*corev1.Service
	sts      *appsv1.StatefulSet
	// pdbs by name: `<name>` and, for engines that fail over (postgres), `<name>-primary`.
	pdbs map[string]*policyv1.PodDisruptionBudget
	// createOnly: the primary lease's ServiceAccount, Role, RoleBinding and Lease (postgres), created as
	// they are and never updated (opkit writes the Lease's holder only when the primary changes).
	createOnly []*unstructured.Unstructured
}

func applyDefaults(db *Database) {
	if db.Spec.Replicas == nil {
		one := int32(1)
		db.Spec.Replicas = &one
	}
	if db.Spec.DeletionPolicy == "" {
		db.Spec.DeletionPolicy = "Retain"
	}
	if db.Spec.DatabaseName == "" {
		db.Spec.DatabaseName = "app"
	}
	if db.Spec.Username == "" {
		db.Spec.Username = "app"
	}
	if db.Spec.ServiceType == "" {
		db.Spec.ServiceType = "ClusterIP"
	}
}

// newDesired renders the children; an input outside the benchmark's templates is a terminal error.
func newDesired(db *Database) (*desired, error) {
	key := fmt.Sprintf("%s/%s/%d", db.Spec.Engine, db.Spec.Version, *db.Spec.Replicas)
	raw, ok := templates.Templates[key]
	if !ok || len(db.Name) != len(templates.Placeholders.Name) || len(db.Namespace) != len(templates.Placeholders.Namespace) {
		return nil, fmt.Errorf("no template for %s %s/%s (the benchmark peer only supports the benchmark's inputs)", key, db.Namespace, db.Name)
	}
	text := strings.ReplaceAll(string(raw), templates.Placeholders.Name, db.Name)
	text = strings.ReplaceAll(text, templates.Placeholders.Namespace, db.Namespace)
	d := &desired{db: db, services: map[string]*corev1.Service{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	if err := json.Unmarshal([]byte(text), &d.tpl); err != nil {
		return nil, err
	}
	for _, c := range d.tpl.Children {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(c, &tm); err != nil {
			return nil, err
		}
		var err error
		switch tm.Kind {
		case "Secret":
			d.secret = &corev1.Secret{}
			err = json.Unmarshal(c, d.secret)
			d.secret.Data = map[string][]byte{}
			for k, v := range d.secret.StringData {
				d.secret.Data[k] = []byte(v)
			}
			d.secret.StringData = nil
		case "ConfigMap":
			d.cm = &corev1.ConfigMap{}
			err = json.Unmarshal(c, d.cm)
		case "Service":
			s := &corev1.Service{}
			err = json.Unmarshal(c, s)
			d.services[s.Name] = s
		case "StatefulSet":
			d.sts = &appsv1.StatefulSet{}
			err = json.Unmarshal(c, d.sts)
		case "PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			err = json.Unmarshal(c, p)
			d.pdbs[p.Name] = p
		case "ServiceAccount", "Role", "RoleBinding", "Lease":
			u := &unstructured.Unstructured{}
			err = json.Unmarshal(c, &u.Object)
			d.createOnly = append(d.createOnly, u)
		}
		if err != nil {
			return nil, err
		}
	}
	n := db.Name
	d.names = childNames{statefulSet: d.tpl.StatefulSetName, headless: n + "-headless", readWrite: n,
		readOnly: n + "-ro", secret: d.tpl.SecretName, configMap: d.cm.Name, pdb: n}
	// The config hash over the rendered ConfigMap (same function as opkit's configHash).
	hash := configHash(d.cm.Data, d.tpl.UnhashedKeys)
	for k, v := range d.sts.Spec.Template.Annotations {
		if v == templates.Placeholders.ConfigHash {
			d.sts.Spec.Template.Annotations[k] = hash
		}
	}
	return d, nil
}

// configHash: sha256 over key \0 value \0 with keys sorted, first 32 hex digits (opkit's configHash);
// the cluster record (unhashed keys) is not configuration and is left out.
func configHash(data map[string]string, unhashed []string) string {
	skip := map[string]bool{}
	for _, k := range unhashed {
		skip[k] = true
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(data[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func (d *desired) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: d.db.Namespace}
}

func (d *desired) selectorLabels() map[string]string {
	return map[string]string{labelName: d.db.Spec.Engine, labelInstance: d.db.Name, labelManagedBy: managedBy}
}

func (d *desired) selectorString() string { return d.tpl.Selector }

func (d *desired) endpoints() *Endpoints {
	e := d.tpl.Endpoints
	return &e
}

func password(length int, alphabet string) string {
	n := len(alphabet)
	limit := 256 - 256%n
	out := make([]byte, 0, length)
	buf := make([]byte, length*2)
	for len(out) < length {
		if _, err := rand.Read(buf); err != nil {
			panic(err)
		}
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, alphabet[int(b)%n])
			if len(out) == length {
				break
			}
		}
	}
	return string(out)
}

// scramVerifier: SCRAM-SHA-256 in PostgreSQL's pg_authid format (RFC 5802 / 7677), like opkit's scram.ts.
func scramVerifier(password string, salt []byte, iterations int) string {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, 32)
	if err != nil {
		panic(err)
	}
	mac := func(msg string) []byte {
		h := hmac.New(sha256.New, salted)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac("Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac("Server Key")))
}

// roleVerifier: the salt derived from the Database's uid and the role, keyed by the password (opkit's
// roleVerifier), so the same password gives the same verifier on every reconcile.
// Verifiers already computed are remembered by their salt (bounded, the oldest first out), and a stored
// verifier with this password's salt is kept as it is, as opkit's scram.ts does, so that both check a
// Secret's verifiers with the same work (also after a restart).
func roleVerifier(password, databaseID, role string, iterations int, stored string) string {
	h := hmac.New(sha256.New, []byte(password))
	h.Write([]byte("opkit\x00" + databaseID + "\x00" + role))
	salt := h.Sum(nil)[:16]
	key := fmt.Sprintf("%d:%x", iterations, salt)
	verifiersMu.Lock()
	v, ok := verifiers[key]
	verifiersMu.Unlock()
	if ok {
		return v
	}
	if storedMatches(stored, salt, iterations) {
		v = stored
	} else {
		v = scramVerifier(password, salt, iterations)
	}
	verifiersMu.Lock()
	defer verifiersMu.Unlock()
	if _, ok := verifiers[key]; !ok {
		if len(verifierOrder) >= verifiersLimit {
			delete(verifiers, verifierOrder[0])
			verifierOrder = verifierOrder[1:]
		}
		verifiers[key] = v
		verifierOrder = append(verifierOrder, key)
	}
	return v
}

// storedMatches: whether v is a verifier as written (these iterations, this salt, two SHA-256 keys).
func storedMatches(v string, salt []byte, iterations int) bool {
	prefix := fmt.Sprintf("SCRAM-SHA-256$%d:%s$", iterations, base64.StdEncoding.EncodeToString(salt))
	if !strings.HasPrefix(v, prefix) {
		return false
	}
	keys := strings.Split(v[len(prefix):], ":")
	if len(keys) != 2 {
		return false
	}
	for _, k := range keys {
		if b, err := base64.StdEncoding.DecodeString(k); err != nil || len(b) != 32 {
			return false
		}
	}
	return true
}

const verifiersLimit = 16384

var (
	verifiersMu   sync.Mutex
	verifiers     = map[string]string{}
	verifierOrder []string
)

// derive sets the derived keys (SCRAM verifiers) from the Secret's usernames and passwords.
func (d *desired) derive(data map[string][]byte) {
	for _, k := range d.tpl.DerivedKeys {
		u, p := string(data[k.UsernameKey]), string(data[k.PasswordKey])
		if u != "" && p != "" {
			data[k.Key] = []byte(roleVerifier(p, string(d.db.UID), u, d.tpl.ScramIterations, string(data[k.Key])))
		}
	}
}

// credentialsSecret: the whole Secret with fresh passwords and their verifiers.
func (d *desired) credentialsSecret() *corev1.Secret {
	s := d.secret.DeepCopy()
	for _, k := range d.tpl.PasswordKeys {
		s.Data[k] = []byte(password(d.tpl.PasswordLength, d.tpl.PasswordAlphabet))
	}
	d.derive(s.Data)
	return s
}

func (d *desired) configMap() *corev1.ConfigMap      { return d.cm.DeepCopy() }
func (d *desired) headlessService() *corev1.Service  { return d.services[d.names.headless].DeepCopy() }
func (d *desired) readWriteService() *corev1.Service { return d.services[d.names.readWrite].DeepCopy() }
func (d *desired) statefulSet() *appsv1.StatefulSet  { return d.sts.DeepCopy() }
func (d *desired) readOnlyService() *corev1.Service {
	if s, ok := d.services[d.names.readOnly]; ok {
		return s.DeepCopy()
	}
	return nil
}

// podDisruptionBudget: the desired PDB of that name (`<name>`, `<name>-primary`), nil when none.
func (d *desired) podDisruptionBudget(name string) *policyv1.PodDisruptionBudget {
	if p, ok := d.pdbs[name]; ok {
		return p.DeepCopy()
	}
	return nil
}
