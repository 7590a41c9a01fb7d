package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// route is one operation the fake serves: its method and path in GitHub's
// OpenAPI description (the {ref} of the git ref operations may hold
// slashes), and GitHub's operationId.
type route struct {
	method, path, op string
	h                func(s *Server) http.HandlerFunc
}

// routeTable lists every operation the fake serves, named by GitHub's
// operationId (the names Fail and RequestsFor take).
var routeTable = []route{
	{"POST", "/repos/{owner}/{repo}/check-runs", "checks/create", func(s *Server) http.HandlerFunc { return s.createCheckRun }},
	{"PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", "checks/update", func(s *Server) http.HandlerFunc { return s.updateCheckRun }},
	{"GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/list-comments", func(s *Server) http.HandlerFunc { return s.listComments }},
	{"POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment", func(s *Server) http.HandlerFunc { return s.createComment }},
	{"PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "issues/update-comment", func(s *Server) http.HandlerFunc { return s.updateComment }},
	{"GET", "/repos/{owner}/{repo}/pulls", "pulls/list", func(s *Server) http.HandlerFunc { return s.listPulls }},
	{"POST", "/repos/{owner}/{repo}/pulls", "pulls/create", func(s *Server) http.HandlerFunc { return s.createPull }},
	{"GET", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/get", func(s *Server) http.HandlerFunc { return s.getPull }},
	{"PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/update", func(s *Server) http.HandlerFunc { return s.updatePull }},
	{"GET", "/repos/{owner}/{repo}/git/ref/{ref}", "git/get-ref", func(s *Server) http.HandlerFunc { return s.getRef }},
	{"POST", "/repos/{owner}/{repo}/git/refs", "git/create-ref", func(s *Server) http.HandlerFunc { return s.createRef }},
	{"PATCH", "/repos/{owner}/{repo}/git/refs/{ref}", "git/update-ref", func(s *Server) http.HandlerFunc { return s.updateRef }},
	{"POST", "/repos/{owner}/{repo}/git/blobs", "git/create-blob", func(s *Server) http.HandlerFunc { return s.createBlob }},
	{"GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}", "git/get-tree", func(s *Server) http.HandlerFunc { return s.getTree }},
	{"POST", "/repos/{owner}/{repo}/git/trees", "git/create-tree", func(s *Server) http.HandlerFunc { return s.createTree }},
	{"GET", "/repos/{owner}/{repo}/git/commits/{commit_sha}", "git/get-commit", func(s *Server) http.HandlerFunc { return s.getCommit }},
	{"POST", "/repos/{owner}/{repo}/git/commits", "git/create-commit", func(s *Server) http.HandlerFunc { return s.createCommit }},
	{"GET", "/user", "users/get-authenticated", func(s *Server) http.HandlerFunc { return s.getUser }},
	{"GET", "/repos/{owner}/{repo}/collaborators/{username}/permission", "repos/get-collaborator-permission-level", func(s *Server) http.HandlerFunc { return s.getPermission }},
	{"POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", "reactions/create-for-issue-comment", func(s *Server) http.HandlerFunc { return s.createReaction }},
	{"POST", "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions", "reactions/create-for-pull-request-review-comment", func(s *Server) http.HandlerFunc { return s.createReaction }},
}

// ---- collaborators and reactions -------------------------------------------

// SetPermission gives login a role on the repository, as the collaborator
// permission API reports it: "admin", "maintain", "write", "triage" or
// "read" (a user never set reads "read", as on a public repository).
func (s *Server) SetPermission(login, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permissions[strings.ToLower(login)] = role
}

// getPermission answers the collaborator permission API: permission is the
// legacy level (maintain reads as write, triage as read), role_name the role.
func (s *Server) getPermission(w http.ResponseWriter, r *http.Request) {
	login := r.PathValue("username")
	role := s.permissions[strings.ToLower(login)]
	if role == "" {
		role = "read"
	}
	perm := map[string]string{"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}[role]
	writeJSON(w, http.StatusOK, fromExample("repos/get-collaborator-permission-level", http.StatusOK, map[string]any{
		"permission": perm, "role_name": role,
		"user": map[string]any{"login": login, "role_name": role},
	}))
}

// Reaction is the fake's record of one reaction.
type Reaction struct {
	// CommentID is the comment reacted to; Review is true for a pull
	// request review comment.
	CommentID int64
	Review    bool
	Content   string
	Login     string
}

// Reactions returns copies of every reaction made, oldest first.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// createReaction adds a reaction to an issue comment (any id the fake
// knows, or one seeded by the event under test) or a review comment; the
// same reaction by the same identity twice answers 200 with the first.
func (s *Server) createReaction(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("comment_id"), 10, 64)
	var b struct {
		Content string `json:"content"`
	}
	if !decode(w, r, &b) {
		return
	}
	login, typ := s.identity()
	review := strings.Contains(r.URL.Path, "/pulls/comments/")
	status := http.StatusCreated
	found := false
	for _, x := range s.reactions {
		if x.CommentID == id && x.Review == review && x.Content == b.Content && x.Login == login {
			status, found = http.StatusOK, true
		}
	}
	if !found {
		s.reactions = append(s.reactions, Reaction{CommentID: id, Review: review, Content: b.Content, Login: login})
	}
	writeJSON(w, status, fromExample("reactions/create-for-issue-comment", http.StatusCreated, map[string]any{
		"id": s.newID(), "content": b.Content, "user": map[string]any{"login": login, "type": typ},
		"created_at": s.timestamp(),
	}))
}

// Operations returns the operationIds the fake serves, in the route
// table's order.
func Operations() []string {
	out := make([]string, 0, len(routeTable))
	for _, r := range routeTable {
		out = append(out, r.op)
	}
	return out
}

// routes registers every operation of routeTable.
func (s *Server) routes(mux *http.ServeMux) {
	for _, r := range routeTable {
		pattern := r.path
		if strings.HasSuffix(pattern, "/{ref}") {
			pattern = strings.TrimSuffix(pattern, "}") + "...}" // a ref holds slashes
		}
		s.handle(mux, r.method+" "+pattern, r, r.h(s))
	}
}

// ---- issue comments ---------------------------------------------------------

// Comment is the fake's record of one issue or pull request comment.
type Comment struct {
	ID    int64
	Issue int
	Body  string
	Login string
	// UserType is "User" or "Bot".
	UserType string
	// AuthorAssociation is OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, ….
	AuthorAssociation string
	// Edits counts accepted updates.
	Edits int
}

// AddIssue makes issue (or pull request) number n exist, so comments can be
// listed and created on it.
func (s *Server) AddIssue(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issues[n] = true
	s.nextIssue = max(s.nextIssue, n+1)
}

// AddComment seeds a comment on issue n (which is made to exist) and
// returns its id.
func (s *Server) AddComment(n int, login, association, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issues[n] = true
	s.nextIssue = max(s.nextIssue, n+1)
	c := &Comment{ID: s.newID(), Issue: n, Body: body, Login: login, UserType: "User", AuthorAssociation: association}
	s.comments = append(s.comments, c)
	return c.ID
}

// Comments returns copies of the comments on issue n, oldest first.
func (s *Server) Comments(n int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.Issue == n {
			out = append(out, *c)
		}
	}
	return out
}

// TokenLogin is the login the fake gives comments created through the API
// by default (the GITHUB_TOKEN's identity; see SetApp, UsePersonalToken).
const TokenLogin = DefaultAppSlug + "[bot]"

// getUser answers GET /user: the personal access token's user, or 403 for
// an installation token (GitHub: "Resource not accessible by integration").
func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	if s.personal == "" {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration", nil)
		return
	}
	writeJSON(w, http.StatusOK, fromExample("users/get-authenticated", http.StatusOK, map[string]any{"login": s.personal, "id": 4242, "type": "User", "user_view_type": "private"}))
}

// AddBotComment seeds a comment written by a bot (type Bot), e.g. another
// GitHub App's "other-app[bot]", and returns its id.
func (s *Server) AddBotComment(n int, login, body string) int64 {
	id := s.AddComment(n, login, "NONE", body)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			c.UserType = "Bot"
		}
	}
	return id
}

func (s *Server) issueNumber(w http.ResponseWriter, r *http.Request) (int, bool) {
	n, err := strconv.Atoi(r.PathValue("issue_number"))
	if err != nil || !s.issues[n] {
		writeError(w, http.StatusNotFound, "Not Found", nil)
		return 0, false
	}
	return n, true
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request) {
	n, ok := s.issueNumber(w, r)
	if !ok {
		return
	}
	var all []*Comment
	for _, c := range s.comments {
		if c.Issue == n {
			all = append(all, c)
		}
	}
	lo, hi := s.page(w, r, len(all))
	out := []map[string]any{}
	for _, c := range all[lo:hi] {
		out = append(out, s.commentJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// checkBodyLength answers 422 "Body is too long" for a body over BodyChars
// characters, as GitHub does.
func checkBodyLength(w http.ResponseWriter, resource, body string) bool {
	if utf8.RuneCountInString(body) > BodyChars {
		validationFailed(w, resource, "data", "unprocessable", "Body is too long (maximum is 65536 characters)")
		return false
	}
	return true
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	n, ok := s.issueNumber(w, r)
	if !ok {
		return
	}
	body, ok := decodeCommentBody(w, r)
	if !ok {
		return
	}
	login, typ := s.identity()
	c := &Comment{ID: s.newID(), Issue: n, Body: body, Login: login, UserType: typ, AuthorAssociation: "NONE"}
	s.comments = append(s.comments, c)
	writeJSON(w, http.StatusCreated, s.commentJSON(c))
}

func (s *Server) updateComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("comment_id"), 10, 64)
	var c *Comment
	for _, x := range s.comments {
		if x.ID == id {
			c = x
		}
	}
	if c == nil {
		writeError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	body, ok := decodeCommentBody(w, r)
	if !ok {
		return
	}
	c.Body = body
	c.Edits++
	writeJSON(w, http.StatusOK, s.commentJSON(c))
}

// decodeCommentBody reads an issue comment's request body as GitHub
// validates it (body present, not empty, at most 65536 characters) and
// answers the request itself when it is not; ok is false then.
func decodeCommentBody(w http.ResponseWriter, r *http.Request) (body string, ok bool) {
	var b struct {
		Body *string `json:"body"`
	}
	if !decode(w, r, &b) {
		return "", false
	}
	if b.Body == nil || *b.Body == "" {
		validationFailed(w, "IssueComment", "body", "missing_field", "")
		return "", false
	}
	if !checkBodyLength(w, "IssueComment", *b.Body) {
		return "", false
	}
	return *b.Body, true
}

func (s *Server) commentJSON(c *Comment) map[string]any {
	return fromExample("issues/create-comment", http.StatusCreated, map[string]any{
		"id":                 c.ID,
		"body":               c.Body,
		"user":               map[string]any{"login": c.Login, "type": c.UserType},
		"author_association": c.AuthorAssociation,
		"html_url":           s.htmlURL("issues/%d#issuecomment-%d", c.Issue, c.ID),
		"issue_url":          s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/issues/" + strconv.Itoa(c.Issue),
		"url":                s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/issues/comments/" + strconv.FormatInt(c.ID, 10),
	})
}

// ---- pull requests ----------------------------------------------------------

// Pull is the fake's record of one pull request.
type Pull struct {
	Number int
	Title  string
	Body   string
	// Head and Base are branch names in the fake's repository.
	Head, Base string
	// HeadSHA is the head commit when the pull request was last read or
	// changed (the branch may move after that).
	HeadSHA string
	State   string // "open" or "closed"
	Draft   bool
	// Edits counts accepted updates.
	Edits int
}

// AddPull seeds an open pull request from branch head into base (both must
// exist, see Seed) and returns its number.
func (s *Server) AddPull(head, base, title string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &Pull{Number: s.nextIssue, Title: title, Head: head, Base: base, State: "open",
		HeadSHA: s.refs["refs/heads/"+head]}
	s.nextIssue++
	s.issues[p.Number] = true
	s.pulls = append(s.pulls, p)
	return p.Number
}

// Pulls returns copies of every pull request, oldest first.
func (s *Server) Pulls() []Pull {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Pull, 0, len(s.pulls))
	for _, p := range s.pulls {
		cp := *p
		cp.HeadSHA = s.refs["refs/heads/"+p.Head]
		out = append(out, cp)
	}
	return out
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	// head is "owner:branch" (GitHub ignores a head filter without owner).
	headOwner, headBranch, _ := strings.Cut(q.Get("head"), ":")
	var all []*Pull
	for _, p := range s.pulls {
		if state != "all" && p.State != state {
			continue
		}
		if q.Get("head") != "" && (headOwner != s.Owner || headBranch != p.Head) {
			continue
		}
		if base := q.Get("base"); base != "" && base != p.Base {
			continue
		}
		all = append(all, p)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Number > all[j].Number }) // newest first
	lo, hi := s.page(w, r, len(all))
	out := []map[string]any{}
	for _, p := range all[lo:hi] {
		out = append(out, s.pullJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createPull(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Title *string `json:"title"`
		Head  *string `json:"head"`
		Base  *string `json:"base"`
		Body  *string `json:"body"`
		Draft *bool   `json:"draft"`
	}
	if !decode(w, r, &b) {
		return
	}
	switch {
	case b.Title == nil || *b.Title == "":
		validationFailed(w, "PullRequest", "title", "missing_field", "")
		return
	case b.Head == nil || s.refs["refs/heads/"+strings.TrimPrefix(*b.Head, s.Owner+":")] == "":
		validationFailed(w, "PullRequest", "head", "invalid", "")
		return
	case b.Base == nil || s.refs["refs/heads/"+*b.Base] == "":
		validationFailed(w, "PullRequest", "base", "invalid", "")
		return
	}
	head := strings.TrimPrefix(*b.Head, s.Owner+":")
	for _, p := range s.pulls {
		if p.State == "open" && p.Head == head && p.Base == *b.Base {
			validationFailed(w, "PullRequest", "", "custom", "A pull request already exists for "+s.Owner+":"+head+".")
			return
		}
	}
	if s.refs["refs/heads/"+head] == s.refs["refs/heads/"+*b.Base] {
		validationFailed(w, "PullRequest", "", "custom", "No commits between "+*b.Base+" and "+head)
		return
	}
	p := &Pull{Number: s.nextIssue, Title: *b.Title, Head: head, Base: *b.Base, State: "open",
		HeadSHA: s.refs["refs/heads/"+head]}
	if b.Body != nil {
		if !checkBodyLength(w, "PullRequest", *b.Body) {
			return
		}
		p.Body = *b.Body
	}
	if b.Draft != nil {
		p.Draft = *b.Draft
	}
	s.nextIssue++
	s.issues[p.Number] = true
	s.pulls = append(s.pulls, p)
	writeJSON(w, http.StatusCreated, s.pullJSON(p))
}

func (s *Server) findPull(w http.ResponseWriter, r *http.Request) *Pull {
	n, _ := strconv.Atoi(r.PathValue("pull_number"))
	for _, p := range s.pulls {
		if p.Number == n {
			return p
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", nil)
	return nil
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	if p := s.findPull(w, r); p != nil {
		writeJSON(w, http.StatusOK, s.pullJSON(p))
	}
}

func (s *Server) updatePull(w http.ResponseWriter, r *http.Request) {
	p := s.findPull(w, r)
	if p == nil {
		return
	}
	var b struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Body != nil {
		if !checkBodyLength(w, "PullRequest", *b.Body) {
			return
		}
		p.Body = *b.Body
	}
	if b.Title != nil {
		p.Title = *b.Title
	}
	if b.State != nil {
		p.State = *b.State
	}
	if b.Base != nil {
		p.Base = *b.Base
	}
	p.Edits++
	writeJSON(w, http.StatusOK, s.pullJSON(p))
}

func (s *Server) pullJSON(p *Pull) map[string]any {
	p.HeadSHA = s.refs["refs/heads/"+p.Head]
	return fromExample("pulls/get", http.StatusOK, map[string]any{
		// GitHub's own example lists teams without the fields its schema
		// requires; the fake has no team reviewers.
		"requested_teams": []any{},
		"number":          p.Number,
		"title":           p.Title,
		"body":            p.Body,
		"state":           p.State,
		"draft":           p.Draft,
		"html_url":        s.htmlURL("pull/%d", p.Number),
		"head": map[string]any{"ref": p.Head, "sha": p.HeadSHA, "label": s.Owner + ":" + p.Head,
			"repo": map[string]any{"full_name": s.Owner + "/" + s.Repo}},
		"base": map[string]any{"ref": p.Base, "sha": s.refs["refs/heads/"+p.Base], "label": s.Owner + ":" + p.Base,
			"repo": map[string]any{"full_name": s.Owner + "/" + s.Repo}},
	})
}

// ---- git data ---------------------------------------------------------------

func (s *Server) refJSON(ref, sha string) map[string]any {
	return fromExample("git/get-ref", http.StatusOK, map[string]any{
		"ref":    ref,
		"url":    s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/git/" + ref,
		"object": map[string]any{"type": "commit", "sha": sha, "url": s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/git/commits/" + sha},
	})
}

// refPath returns the unescaped ref from a {ref...} path value.
func refPath(r *http.Request) string {
	v := r.PathValue("ref")
	if u, err := url.PathUnescape(v); err == nil {
		v = u
	}
	return fullRef(v)
}

func (s *Server) getRef(w http.ResponseWriter, r *http.Request) {
	ref := refPath(r)
	sha, ok := s.refs[ref]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	writeJSON(w, http.StatusOK, s.refJSON(ref, sha))
}

// refusesWorkflows answers 422 when sha changes .github/workflows/ and the
// fake protects workflows (a GITHUB_TOKEN lacks the "workflows"
// permission).
func (s *Server) refusesWorkflows(w http.ResponseWriter, ref, sha string) bool {
	if !s.protectWorkflows {
		return false
	}
	if p, ok := s.git.changesWorkflows(sha); ok {
		writeError(w, http.StatusUnprocessableEntity,
			"refusing to allow a GitHub App to create or update workflow `"+p+"` without `workflows` permission", nil)
		return true
	}
	return false
}

func (s *Server) createRef(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Ref *string `json:"ref"`
		SHA *string `json:"sha"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Ref == nil || !strings.HasPrefix(*b.Ref, "refs/") || strings.Count(*b.Ref, "/") < 2 {
		writeError(w, http.StatusUnprocessableEntity, "Reference name must start with 'refs/' and have at least two slashes.", nil)
		return
	}
	if b.SHA == nil || s.git.commits[*b.SHA].Tree == "" {
		writeError(w, http.StatusUnprocessableEntity, "Object does not exist", nil)
		return
	}
	if _, exists := s.refs[*b.Ref]; exists {
		writeError(w, http.StatusUnprocessableEntity, "Reference already exists", nil)
		return
	}
	if s.refusesWorkflows(w, *b.Ref, *b.SHA) {
		return
	}
	s.refs[*b.Ref] = *b.SHA
	writeJSON(w, http.StatusCreated, s.refJSON(*b.Ref, *b.SHA))
}

// isAncestor reports whether a is b or an ancestor of b.
func (s *Server) isAncestor(a, b string) bool {
	seen := map[string]bool{}
	stack := []string{b}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c == a {
			return true
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		stack = append(stack, s.git.commits[c].Parents...)
	}
	return false
}

func (s *Server) updateRef(w http.ResponseWriter, r *http.Request) {
	ref := refPath(r)
	old, ok := s.refs[ref]
	if !ok {
		writeError(w, http.StatusUnprocessableEntity, "Reference does not exist", nil)
		return
	}
	var b struct {
		SHA   *string `json:"sha"`
		Force *bool   `json:"force"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.SHA == nil || s.git.commits[*b.SHA].Tree == "" {
		writeError(w, http.StatusUnprocessableEntity, "Object does not exist", nil)
		return
	}
	if (b.Force == nil || !*b.Force) && !s.isAncestor(old, *b.SHA) {
		writeError(w, http.StatusUnprocessableEntity, "Update is not a fast forward", nil)
		return
	}
	if s.refusesWorkflows(w, ref, *b.SHA) {
		return
	}
	s.refs[ref] = *b.SHA
	writeJSON(w, http.StatusOK, s.refJSON(ref, *b.SHA))
}

func (s *Server) createBlob(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Content  *string `json:"content"`
		Encoding string  `json:"encoding"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Content == nil {
		validationFailed(w, "Blob", "content", "missing_field", "")
		return
	}
	var data []byte
	switch b.Encoding {
	case "", "utf-8":
		data = []byte(*b.Content)
	case "base64":
		d, err := base64.StdEncoding.DecodeString(*b.Content)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "content is not valid Base64", nil)
			return
		}
		data = d
	default:
		writeError(w, http.StatusUnprocessableEntity, "encoding must be utf-8 or base64", nil)
		return
	}
	sha := s.git.putBlob(data)
	writeJSON(w, http.StatusCreated, fromExample("git/create-blob", http.StatusCreated,
		map[string]any{"sha": sha, "url": s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/git/blobs/" + sha}))
}

func (s *Server) treeJSON(sha string, recursive bool) map[string]any {
	var entries []map[string]any
	if recursive {
		flat, _ := s.git.flatten(sha)
		paths := make([]string, 0, len(flat))
		for p := range flat {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			e := flat[p]
			m := map[string]any{"path": p, "mode": e.Mode, "type": e.typ(), "sha": e.SHA}
			if b, ok := s.git.blobs[e.SHA]; ok {
				m["size"] = len(b)
			}
			entries = append(entries, m)
		}
	} else {
		for _, e := range s.git.trees[sha] {
			entries = append(entries, map[string]any{"path": e.Name, "mode": e.Mode, "type": e.typ(), "sha": e.SHA})
		}
	}
	return fromExample("git/get-tree", http.StatusOK, map[string]any{"sha": sha, "tree": entries, "truncated": false,
		"url": s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/git/trees/" + sha})
}

func (s *Server) getTree(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("tree_sha")
	if c, ok := s.git.commits[sha]; ok { // GitHub accepts a commit-ish here
		sha = c.Tree
	}
	if _, ok := s.git.trees[sha]; !ok {
		writeError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	rec := r.URL.Query().Get("recursive")
	writeJSON(w, http.StatusOK, s.treeJSON(sha, rec != "" && rec != "0" && rec != "false"))
}

func (s *Server) createTree(w http.ResponseWriter, r *http.Request) {
	var b struct {
		BaseTree string `json:"base_tree"`
		Tree     []struct {
			Path    string           `json:"path"`
			Mode    string           `json:"mode"`
			Type    string           `json:"type"`
			SHA     *json.RawMessage `json:"sha"`
			Content *string          `json:"content"`
		} `json:"tree"`
	}
	if !decode(w, r, &b) {
		return
	}
	flat := map[string]treeEntry{}
	if b.BaseTree != "" {
		base, ok := s.git.flatten(b.BaseTree)
		if !ok {
			validationFailed(w, "Tree", "base_tree", "invalid", "base_tree is not a valid tree oid")
			return
		}
		flat = base
	}
	for _, e := range b.Tree {
		if e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.Contains(e.Path, "//") {
			writeError(w, http.StatusUnprocessableEntity, "tree.path contains a malformed path component", nil)
			return
		}
		switch e.Mode {
		case ModeFile, ModeExecutable, ModeSymlink, ModeSubmodule, modeTree:
		default:
			writeError(w, http.StatusUnprocessableEntity, "tree.mode must be one of 100644, 100755, 040000, 160000, 120000", nil)
			return
		}
		var sha *string
		if e.SHA != nil && string(*e.SHA) != "null" {
			var v string
			if err := json.Unmarshal(*e.SHA, &v); err != nil {
				writeError(w, http.StatusBadRequest, "Problems parsing JSON", nil)
				return
			}
			sha = &v
		}
		switch {
		case e.Content != nil:
			flat[e.Path] = treeEntry{Mode: e.Mode, SHA: s.git.putBlob([]byte(*e.Content))}
		case sha == nil: // {"sha": null} deletes the path
			delete(flat, e.Path)
			for p := range flat {
				if strings.HasPrefix(p, e.Path+"/") {
					delete(flat, p)
				}
			}
		case e.Mode == modeTree:
			sub, ok := s.git.flatten(*sha)
			if !ok {
				validationFailed(w, "Tree", "tree.sha", "invalid", *sha+" is not a valid tree")
				return
			}
			for p := range flat {
				if strings.HasPrefix(p, e.Path+"/") {
					delete(flat, p)
				}
			}
			for p, se := range sub {
				flat[e.Path+"/"+p] = se
			}
		default:
			if _, ok := s.git.blobs[*sha]; !ok && e.Mode != ModeSubmodule {
				validationFailed(w, "Tree", "tree.sha", "invalid", *sha+" is not a valid blob")
				return
			}
			flat[e.Path] = treeEntry{Mode: e.Mode, SHA: *sha}
		}
	}
	sha := s.git.putTree(flat)
	writeJSON(w, http.StatusCreated, s.treeJSON(sha, false))
}

func (s *Server) commitJSON(sha string) map[string]any {
	c := s.git.commits[sha]
	parents := []map[string]any{}
	for _, p := range c.Parents {
		parents = append(parents, map[string]any{"sha": p, "url": s.URL + "/repos/" + s.Owner + "/" + s.Repo + "/git/commits/" + p, "html_url": s.htmlURL("commit/%s", p)})
	}
	return fromExample("git/get-commit", http.StatusOK, map[string]any{
		"sha":      sha,
		"message":  c.Message,
		"tree":     map[string]any{"sha": c.Tree},
		"parents":  parents,
		"html_url": s.htmlURL("commit/%s", sha),
		"author":   map[string]any{"name": "githubtest", "email": "githubtest@example.invalid", "date": "1970-01-01T00:00:00Z"},
	})
}

func (s *Server) getCommit(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("commit_sha")
	if _, ok := s.git.commits[sha]; !ok {
		writeError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	writeJSON(w, http.StatusOK, s.commitJSON(sha))
}

func (s *Server) createCommit(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Message *string  `json:"message"`
		Tree    *string  `json:"tree"`
		Parents []string `json:"parents"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Message == nil {
		validationFailed(w, "Commit", "message", "missing_field", "")
		return
	}
	if b.Tree == nil || s.git.trees[*b.Tree] == nil && *b.Tree != emptyTreeSHA {
		validationFailed(w, "Commit", "tree", "invalid", "Tree SHA does not exist")
		return
	}
	for _, p := range b.Parents {
		if _, ok := s.git.commits[p]; !ok {
			validationFailed(w, "Commit", "parents", "invalid", "Parent SHA does not exist or is not a commit object")
			return
		}
	}
	sha := s.git.putCommit(commitObject{Tree: *b.Tree, Parents: b.Parents, Message: *b.Message})
	writeJSON(w, http.StatusCreated, s.commitJSON(sha))
}

// emptyTreeSHA is Git's well-known empty tree.
const emptyTreeSHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
