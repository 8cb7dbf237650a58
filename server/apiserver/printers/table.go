// Package printers renders typed Kubernetes API objects as metav1.Table, the
// server-side printing format that `kubectl get` requests with
// "Accept: application/json;as=Table;v=v1;g=meta.k8s.io".
//
// The column sets and cell values follow kube-apiserver's built-in printers so
// that an unmodified kubectl shows the same output against kelp as against
// upstream Kubernetes.
package printers

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// TableFor converts one object or a list (e.g. *corev1.PodList) into a Table.
//
// Rows carry the full object in Row.Object (runtime.RawExtension{Object: item});
// the API server later replaces it with PartialObjectMetadata or drops it,
// depending on includeObject. now is used for AGE and other durations.
//
// Like kube-apiserver, every column is always emitted, including the -o wide
// ones (Priority > 0); kubectl hides those itself. Column definitions are
// always filled in: a caller honouring TableOptions.NoHeaders must clear them.
//
// Types without a dedicated printer get the generic table (Name, Created At).
// An error is only returned when a list cannot be walked, or when a printer
// meets data that upstream also rejects (a malformed controller reference on a
// ControllerRevision).
func TableFor(obj runtime.Object, now time.Time) (*metav1.Table, error) {
	p, isList := printerFor(obj)

	items := []runtime.Object{obj}
	if isList {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, err
		}
	}

	table := &metav1.Table{}
	if p == nil {
		table.ColumnDefinitions = defaultColumns()
		table.Rows = defaultRows(items)
	} else {
		table.ColumnDefinitions = p.columns
		if isList && p.order != nil {
			items = slices.Clone(items)
			slices.SortStableFunc(items, p.order)
		}
		table.Rows = make([]metav1.TableRow, 0, len(items))
		for _, item := range items {
			row, err := p.print(item, now)
			if err != nil {
				return nil, err
			}
			table.Rows = append(table.Rows, row)
		}
	}

	// Same precedence as upstream: list metadata when the input is a list,
	// otherwise the single object's resourceVersion.
	if lm, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = lm.GetResourceVersion()
		table.Continue = lm.GetContinue()
		table.RemainingItemCount = lm.GetRemainingItemCount()
	} else if cm, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = cm.GetResourceVersion()
	}
	return table, nil
}

// printer renders one kind. columns and the cells produced by print must stay
// the same length and order: kubectl matches cells to columns by index.
type printer struct {
	columns []metav1.TableColumnDefinition
	print   func(obj runtime.Object, now time.Time) (metav1.TableRow, error)
	// order, when set, is the order of a list's rows, where upstream's
	// printer sorts them (FlowSchemas by matching precedence).
	order func(a, b runtime.Object) int
}

// registry is keyed by the pointer type of a single item (e.g. *corev1.Pod);
// lists are resolved through their Items element type so that an empty list
// still gets the kind's columns rather than the generic ones.
var registry = map[reflect.Type]*printer{}

func register(p *printer, itemType reflect.Type) {
	if _, dup := registry[itemType]; dup {
		panic("printers: duplicate printer for " + itemType.String())
	}
	registry[itemType] = p
}

// cells registers a printer whose rows need nothing beyond their cells.
func cells[T any](columns []metav1.TableColumnDefinition, fn func(obj *T, now time.Time) []interface{}) {
	rows(columns, func(obj *T, now time.Time) (metav1.TableRow, error) {
		return metav1.TableRow{Cells: fn(obj, now)}, nil
	})
}

// rows registers a printer that also sets row conditions or can fail.
func rows[T any](columns []metav1.TableColumnDefinition, fn func(obj *T, now time.Time) (metav1.TableRow, error)) {
	register(&printer{
		columns: columns,
		print: func(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
			typed, ok := any(obj).(*T)
			if !ok {
				// Only reachable if a list's items do not match its Items
				// type, which ExtractList never produces.
				return metav1.TableRow{}, &typeMismatchError{want: reflect.TypeOf((*T)(nil)), got: reflect.TypeOf(obj)}
			}
			row, err := fn(typed, now)
			if err != nil {
				return metav1.TableRow{}, err
			}
			row.Object = runtime.RawExtension{Object: obj}
			return row, nil
		},
	}, reflect.TypeOf((*T)(nil)))
}

// ordered sets the order of the rows of a list of T, whose printer is
// registered already.
func ordered[T any](cmp func(a, b *T) int) {
	registry[reflect.TypeOf((*T)(nil))].order = func(a, b runtime.Object) int {
		return cmp(any(a).(*T), any(b).(*T))
	}
}

type typeMismatchError struct{ want, got reflect.Type }

func (e *typeMismatchError) Error() string {
	return "printers: expected " + e.want.String() + ", got " + e.got.String()
}

// printerFor returns the printer for obj (nil when none is registered) and
// whether obj is a list.
func printerFor(obj runtime.Object) (*printer, bool) {
	if !meta.IsListType(obj) {
		return registry[reflect.TypeOf(obj)], false
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, true
	}
	items, ok := v.Elem().Type().FieldByName("Items")
	if !ok || items.Type.Kind() != reflect.Slice {
		return nil, true
	}
	elem := items.Type.Elem()
	if elem.Kind() != reflect.Struct {
		return nil, true
	}
	return registry[reflect.PointerTo(elem)], true
}

// defaultColumns matches the generic table convertor kube-apiserver uses for
// resources without a printer (e.g. roles, clusterroles, limitranges).
func defaultColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]},
	}
}

// defaultRows skips items without object metadata: upstream refuses the whole
// request for those, and a row without metadata could not later be reduced to
// PartialObjectMetadata anyway.
func defaultRows(items []runtime.Object) []metav1.TableRow {
	out := make([]metav1.TableRow, 0, len(items))
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			continue
		}
		out = append(out, metav1.TableRow{
			Cells:  []interface{}{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)},
			Object: runtime.RawExtension{Object: item},
		})
	}
	return out
}

var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
}

func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

// wide marks a column that kubectl only shows with -o wide.
func wide(c metav1.TableColumnDefinition) metav1.TableColumnDefinition {
	c.Priority = 1
	return c
}

// The container columns shared by every workload printer.
func containersColumn() metav1.TableColumnDefinition {
	return wide(column("Containers", "string", "Names of each container in the template."))
}

func imagesColumn() metav1.TableColumnDefinition {
	return wide(column("Images", "string", "Images referenced by each container in the template."))
}

// since renders the time elapsed from t to now; a zero time is "<unknown>".
func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func sinceMicro(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func age(m metav1.ObjectMeta, now time.Time) string {
	return since(m.CreationTimestamp, now)
}

// joinOr joins parts with sep, or returns empty when there are none.
func joinOr(parts []string, sep, empty string) string {
	if len(parts) == 0 {
		return empty
	}
	return strings.Join(parts, sep)
}

// truncatedList renders at most limit entries followed by "+ N more...",
// where N counts every entry past the limit. Empty renders as "<unset>".
func truncatedList(entries []string, limit int) string {
	if len(entries) > limit {
		return strings.Join(entries[:limit], ",") + " + " + strconv.Itoa(len(entries)-limit) + " more..."
	}
	return joinOr(entries, ",", "<unset>")
}

func boolPtrString(b *bool) string {
	if b == nil {
		return "<unset>"
	}
	if *b {
		return "True"
	}
	return "False"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Has reports whether obj's kind has a printer of its own; kinds without
// one get the generic table (Name, Created At).
func Has(obj runtime.Object) bool {
	p, _ := printerFor(obj)
	return p != nil
}
