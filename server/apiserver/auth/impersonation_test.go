package auth

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestImpersonate(t *testing.T) {
	idx := policyIndex(t)
	// carol may impersonate alice, the group devs, service accounts in
	// apps, and the extra "scopes" value "view".
	idx.Set(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "imp"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"alice"}},
		{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"groups"}, ResourceNames: []string{"devs"}},
		{Verbs: []string{"impersonate"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/scopes"}, ResourceNames: []string{"view"}},
		{Verbs: []string{"impersonate"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"uids"}, ResourceNames: []string{"u-1"}},
	}})
	idx.Set(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "imp"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "imp"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}}})
	idx.Set(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "imp-sa"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}}})
	az := Chain{PrivilegedGroup{}, RBAC{Index: idx}}
	carol := authd("carol")
	req := func(h map[string][]string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "https://kelp/api", nil)
		for k, vs := range h {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		want    *User
		wantErr string // the 403/400 message
	}{
		{"no headers", nil, carol, ""},
		{"user", map[string][]string{"Impersonate-User": {"alice"}}, &User{Name: "alice", Groups: []string{"system:authenticated"}}, ""},
		{"user and group", map[string][]string{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}},
			&User{Name: "alice", Groups: []string{"devs", "system:authenticated"}}, ""},
		{"extra and uid", map[string][]string{"Impersonate-User": {"alice"}, "Impersonate-Extra-Scopes": {"view"}, "Impersonate-Uid": {"u-1"}},
			&User{Name: "alice", UID: "u-1", Groups: []string{"system:authenticated"}, Extra: map[string][]string{"scopes": {"view"}}}, ""},
		{"service account", map[string][]string{"Impersonate-User": {"system:serviceaccount:apps:web"}},
			&User{Name: "system:serviceaccount:apps:web", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:apps", "system:authenticated"}}, ""},
		{"other user", map[string][]string{"Impersonate-User": {"bob"}}, nil,
			`users "bob" is forbidden: User "carol" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{"other group", map[string][]string{"Impersonate-User": {"alice"}, "Impersonate-Group": {"system:masters"}}, nil,
			`groups "system:masters" is forbidden: User "carol" cannot impersonate resource "groups" in API group "" at the cluster scope`},
		{"service account elsewhere", map[string][]string{"Impersonate-User": {"system:serviceaccount:kube-system:admin"}}, nil,
			`serviceaccounts "admin" is forbidden: User "carol" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system"`},
		{"other extra", map[string][]string{"Impersonate-User": {"alice"}, "Impersonate-Extra-Scopes": {"admin"}}, nil,
			`userextras.authentication.k8s.io "admin" is forbidden: User "carol" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope`},
		{"group without user", map[string][]string{"Impersonate-Group": {"devs"}}, nil, "requested [groups/devs] without impersonating a user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req(tc.headers)
			got, err := Impersonate(az, carol, r)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err\n got %v\nwant %s", err, tc.wantErr)
				}
				if !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
					t.Errorf("not a 403/400: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || got.UID != tc.want.UID || !slices.Equal(got.Groups, tc.want.Groups) || len(got.Extra) != len(tc.want.Extra) {
				t.Errorf("user %+v, want %+v", got, tc.want)
			}
			if r.Header.Get("Impersonate-User") != "" {
				t.Error("headers left on the request")
			}
		})
	}
	// Admins may impersonate anyone, anonymous included.
	got, err := Impersonate(az, authd("kelp-admin", "system:masters"), req(map[string][]string{"Impersonate-User": {"system:anonymous"}}))
	if err != nil || got.Name != "system:anonymous" || !slices.Equal(got.Groups, []string{"system:unauthenticated"}) {
		t.Errorf("anonymous: %+v %v", got, err)
	}
}

// Whatever the headers, impersonation answers with a user or a 400/403
// Status, never a panic, and never lets a user without the verb through.
func FuzzImpersonate(f *testing.F) {
	f.Add("alice", "devs", "scopes", "view", "u-1")
	f.Add("system:serviceaccount:apps:web", "", "", "", "")
	f.Add("system:serviceaccount::", "system:masters", "%zz", "", "")
	f.Add("", "g", "", "", "")
	f.Add("system:anonymous", "system:unauthenticated", "a%2Fb", "x", "")
	idx := policyIndex(f)
	az := Chain{PrivilegedGroup{}, RBAC{Index: idx}}
	f.Fuzz(func(t *testing.T, user, group, extraKey, extraValue, uid string) {
		r := httptest.NewRequest(http.MethodGet, "https://kelp/api", nil)
		set := func(k, v string) {
			if v != "" {
				r.Header[k] = []string{v}
			}
		}
		set("Impersonate-User", user)
		set("Impersonate-Group", group)
		if extraKey != "" {
			set(http.CanonicalHeaderKey("Impersonate-Extra-"+extraKey), extraValue)
		}
		set("Impersonate-Uid", uid)
		bob := authd("bob")
		got, err := Impersonate(az, bob, r)
		if err != nil {
			if !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("not a 400/403: %v", err)
			}
			return
		}
		if got != bob {
			t.Fatalf("bob, who may impersonate nobody, became %+v", got)
		}
		admin, err := Impersonate(az, authd("kelp-admin", "system:masters"), r)
		if err != nil && !apierrors.IsBadRequest(err) {
			t.Fatalf("admin: %v", err)
		}
		_ = admin
	})
}
