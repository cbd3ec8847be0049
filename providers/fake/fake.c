/* fake.c - the fake provider: deterministic, in-memory sandboxes for engine, broker, session
 * and replay tests (DESIGN §8). Capabilities are switchable from its config block, faults can
 * be injected (gone, slow, fail on create) from the block or at run time through fake.h, and
 * every create and destroy is recorded for tests to inspect.
 *
 * Sandbox ids are "fk-<n>" with n counting from 1 per opened instance, so a recorded run
 * replays to the same ids. Programs run in fake_interp.c. This provider never starts a process,
 * opens a file or touches the network.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "providers/fake/fake.h"
#include "providers/fake/fake_internal.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

static const sbx_option_spec fake_option_specs[] = {
    {"languages", SBX_OPT_LIST, "python,bash", NULL, 0, 0, "languages run_code accepts"},
    {"isolation", SBX_OPT_ENUM, "none", "none|os_policy|container|syscall_filter|micro_vm", 0, 0,
     "isolation tier to declare"},
    {"shell", SBX_OPT_BOOL, "true", NULL, 0, 0, "offer run_command"},
    {"files", SBX_OPT_BOOL, "true", NULL, 0, 0, "offer write_file/read_file/list_files"},
    {"package_install", SBX_OPT_BOOL, "true", NULL, 0, 0, "offer install_packages"},
    {"stateful", SBX_OPT_BOOL, "true", NULL, 0, 0, "declare stateful run_code"},
    {"attach", SBX_OPT_BOOL, "true", NULL, 0, 0, "reconnect to a sandbox by id"},
    {"attaches_external", SBX_OPT_BOOL, "true", NULL, 0, 0, "attach to attach_to environments"},
    {"principal_user", SBX_OPT_BOOL, "false", NULL, 0, 0, "act as a user principal"},
    {"policy_network", SBX_OPT_BOOL, "true", NULL, 0, 0, "declare network deny/allow enforced"},
    {"policy_network_domains", SBX_OPT_BOOL, "true", NULL, 0, 0, "declare allowlists enforced"},
    {"policy_filesystem", SBX_OPT_BOOL, "true", NULL, 0, 0, "declare fs_read/fs_write enforced"},
    {"policy_resources", SBX_OPT_BOOL, "true", NULL, 0, 0, "declare cpu/memory/pids/disk enforced"},
    {"streaming", SBX_OPT_BOOL, "true", NULL, 0, 0, "stream output chunks"},
    {"expose", SBX_OPT_BOOL, "false", NULL, 0, 0, "offer expose (a URL naming the sandbox)"},
    {"expose_token", SBX_OPT_BOOL, "false", NULL, 0, 0, "expose also returns an access token"},
    {"fail_create", SBX_OPT_BOOL, "false", NULL, 0, 0, "fault: every create fails (PROVISION)"},
    {"gone", SBX_OPT_BOOL, "false", NULL, 0, 0, "fault: every attach is GONE"},
    {"slow_ms", SBX_OPT_INT, "0", NULL, 0, 3600000, "fault: every operation sleeps this long"},
    {"held", SBX_OPT_LIST, "", NULL, 0, 0,
     "SUBJECT=ID sandboxes made before this engine: live, and listed (list_held) as that "
     "principal's"},
    {"fail_list", SBX_OPT_BOOL, "false", NULL, 0, 0, "fault: list_held fails (PROVISION)"},
    {"list_extra", SBX_OPT_STRING, "", NULL, 0, 0,
     "fault: every list_files also answers an entry of this path, as a hostile sandbox could"},
    {NULL, SBX_OPT_STRING, NULL, NULL, 0, 0, NULL},
};

/* One opened instance (one profile of one engine). `mu` guards everything below it. */
struct sbx_fake {
    struct sbx_fake *next_registered; /* registry list (registry_mu) */
    char *profile;
    sbx_capabilities *caps; /* immutable after open */
    pthread_mutex_t mu;
    fake_box **boxes; /* index n-1 holds "fk-<n>"; NULL once freed */
    size_t n_boxes, cap_boxes;
    fake_box **external; /* attach_to environments (attached profiles) */
    size_t n_external;
    sbx_strlist created, destroyed;
    size_t destroy_calls;
    sbx_strlist held_ids, held_subjects; /* the "held" option, immutable after open */
    bool fail_create, gone, expose_token, attach_stalls, fail_list;
    int fail_destroys; /* the next this many destroys fail */
    char *list_extra;  /* "": none */
    int64_t slow_ms;
    int64_t last_deadline;
    int running, max_parallel;
    bool overlap;
    atomic_bool gate_closed; /* read without the lock on every operation */
    uint64_t ops;
};

typedef struct fake_handle {
    sbx_sandbox base; /* first: the engine sees an sbx_sandbox */
    struct sbx_fake *f;
    fake_box *box;
} fake_handle;

/* ---- registry for the test API ------------------------------------------------------------ */

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sbx_fake *registry;

sbx_fake *sbx_fake_get(const char *profile)
{
    pthread_mutex_lock(&registry_mu);
    sbx_fake *f = registry;
    while (f != NULL && strcmp(f->profile, profile) != 0)
        f = f->next_registered;
    pthread_mutex_unlock(&registry_mu);
    return f;
}

/* ---- boxes -------------------------------------------------------------------------------- */

static fake_box *box_new(const char *id)
{
    fake_box *b = calloc(1, sizeof(*b));
    if (b == NULL || (b->id = strdup(id)) == NULL) {
        free(b);
        return NULL;
    }
    b->alive = true;
    pthread_mutex_init(&b->mu, NULL);
    return b;
}

static void box_free(fake_box *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n_vars; i++) {
        free(b->vars[i].name);
        fake_value_free(&b->vars[i].v);
    }
    for (size_t i = 0; i < b->n_files; i++) {
        free(b->files[i].path);
        free(b->files[i].data);
    }
    free(b->vars);
    free(b->files);
    pthread_mutex_destroy(&b->mu);
    free(b->id);
    free(b);
}

/* Finds a box by id (f->mu held); NULL when unknown or not alive. *slot gets its table cell. */
static fake_box *box_find(struct sbx_fake *f, const char *id, fake_box ***slot)
{
    if (strncmp(id, "fk-", 3) == 0) {
        char *end = NULL;
        unsigned long long n = strtoull(id + 3, &end, 10);
        if (end != id + 3 && *end == '\0' && n >= 1 && n <= f->n_boxes && f->boxes[n - 1] != NULL &&
            f->boxes[n - 1]->alive) {
            if (slot != NULL)
                *slot = &f->boxes[n - 1];
            return f->boxes[n - 1];
        }
    }
    for (size_t i = 0; i < f->n_external; i++)
        if (f->external[i] != NULL && f->external[i]->alive &&
            strcmp(f->external[i]->id, id) == 0) {
            if (slot != NULL)
                *slot = &f->external[i];
            return f->external[i];
        }
    return NULL;
}

/* Marks a box dead; frees it now if no handle holds it, else when the last handle closes. */
static void box_kill(fake_box **slot)
{
    fake_box *b = *slot;
    b->alive = false;
    if (b->refs == 0) {
        box_free(b);
        *slot = NULL;
    }
}

/* ---- options ------------------------------------------------------------------------------ */

static bool opt_bool(const sbx_options *o, const char *key)
{
    if (o != NULL)
        return sbx_options_get_bool(o, key);
    for (const sbx_option_spec *s = fake_option_specs; s->key != NULL; s++)
        if (strcmp(s->key, key) == 0)
            return s->default_value != NULL && strcmp(s->default_value, "true") == 0;
    return false;
}

static Sbx__V1__Isolation isolation_from(const char *name)
{
    if (name == NULL)
        return SBX__V1__ISOLATION__ISOLATION_NONE;
    if (strcmp(name, "os_policy") == 0)
        return SBX__V1__ISOLATION__ISOLATION_OS_POLICY;
    if (strcmp(name, "container") == 0)
        return SBX__V1__ISOLATION__ISOLATION_CONTAINER;
    if (strcmp(name, "syscall_filter") == 0)
        return SBX__V1__ISOLATION__ISOLATION_SYSCALL_FILTER;
    if (strcmp(name, "micro_vm") == 0)
        return SBX__V1__ISOLATION__ISOLATION_MICRO_VM;
    return SBX__V1__ISOLATION__ISOLATION_NONE;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static void fake_close(void *state);

static sbx_status fake_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    struct sbx_fake *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->profile = strdup(ctx->profile != NULL ? ctx->profile : "")) == NULL) {
        free(f);
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    }
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&f->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    const sbx_options *o = ctx->options;
    sbx_capabilities *c = f->caps = malloc(sizeof(*f->caps));
    if (c == NULL) {
        fake_close(f);
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    }
    sbx__v1__capabilities__init(c);
    const char *const *langs = NULL;
    size_t n = o != NULL ? sbx_options_get_list(o, "languages", &langs) : 0;
    bool ok = true;
    if (o != NULL) {
        for (size_t i = 0; i < n; i++)
            ok &= sbx_add_string(&c->n_languages, &c->languages, langs[i]);
    } else {
        ok &= sbx_add_string(&c->n_languages, &c->languages, "python");
        ok &= sbx_add_string(&c->n_languages, &c->languages, "bash");
    }
    c->isolation = isolation_from(o != NULL ? sbx_options_get(o, "isolation") : NULL);
    c->shell = opt_bool(o, "shell");
    c->files = opt_bool(o, "files");
    c->package_install = opt_bool(o, "package_install");
    c->stateful = opt_bool(o, "stateful");
    c->attach = opt_bool(o, "attach");
    c->provisions = true;
    c->attaches_external = opt_bool(o, "attaches_external");
    c->principal_user = opt_bool(o, "principal_user");
    c->policy_network = opt_bool(o, "policy_network");
    c->policy_network_domains = opt_bool(o, "policy_network_domains");
    c->policy_filesystem = opt_bool(o, "policy_filesystem");
    c->policy_resources = opt_bool(o, "policy_resources");
    c->streaming = opt_bool(o, "streaming");
    c->expose = opt_bool(o, "expose");
    f->expose_token = opt_bool(o, "expose_token");
    f->fail_create = opt_bool(o, "fail_create");
    f->fail_list = opt_bool(o, "fail_list");
    const char *extra = o != NULL ? sbx_options_get(o, "list_extra") : NULL;
    f->list_extra = extra != NULL && extra[0] ? strdup(extra) : NULL;
    f->gone = opt_bool(o, "gone");
    f->slow_ms = o != NULL ? sbx_options_get_int(o, "slow_ms") : 0;
    /* An attached profile's environment exists before sbx: the fake pretends it does. */
    if (ok && ctx->environment == SBX_ENV_ATTACHED && ctx->attach_to != NULL) {
        f->external = calloc(1, sizeof(*f->external));
        ok = f->external != NULL && (f->external[0] = box_new(ctx->attach_to)) != NULL;
        f->n_external = ok ? 1 : 0;
    }
    /* Sandboxes made before this engine (a restarted worker): live boxes it can attach. */
    const char *const *held = NULL;
    size_t n_held = o != NULL ? sbx_options_get_list(o, "held", &held) : 0;
    for (size_t i = 0; ok && i < n_held; i++) {
        const char *eq = strchr(held[i], '=');
        if (eq == NULL || eq == held[i] || eq[1] == '\0') {
            fake_close(f);
            return sbx_error_set(err, SBX_E_CONFIG, "fake: held entry '%s' is not SUBJECT=ID",
                                 held[i]);
        }
        char *subject = strndup(held[i], (size_t)(eq - held[i]));
        fake_box **grown = realloc(f->external, (f->n_external + 1) * sizeof(*grown));
        if (grown != NULL)
            f->external = grown;
        ok = subject != NULL && grown != NULL &&
             (f->external[f->n_external] = box_new(eq + 1)) != NULL;
        if (ok) {
            f->n_external++;
            ok = sbx_strlist_add(&f->held_ids, eq + 1) &&
                 sbx_strlist_add(&f->held_subjects, subject);
        }
        free(subject);
    }
    if (!ok) {
        fake_close(f);
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    }
    pthread_mutex_lock(&registry_mu);
    f->next_registered = registry;
    registry = f;
    pthread_mutex_unlock(&registry_mu);
    *state = f;
    return SBX_OK;
}

static void fake_close(void *state)
{
    struct sbx_fake *f = state;
    if (f == NULL)
        return;
    pthread_mutex_lock(&registry_mu);
    for (struct sbx_fake **pp = &registry; *pp != NULL; pp = &(*pp)->next_registered)
        if (*pp == f) {
            *pp = f->next_registered;
            break;
        }
    pthread_mutex_unlock(&registry_mu);
    for (size_t i = 0; i < f->n_boxes; i++)
        box_free(f->boxes[i]);
    for (size_t i = 0; i < f->n_external; i++)
        box_free(f->external[i]);
    free(f->boxes);
    free(f->external);
    sbx_strlist_clear(&f->created);
    sbx_strlist_clear(&f->destroyed);
    sbx_strlist_clear(&f->held_ids);
    sbx_strlist_clear(&f->held_subjects);
    if (f->caps != NULL)
        protobuf_c_message_free_unpacked(&f->caps->base, NULL);
    pthread_mutex_destroy(&f->mu);
    free(f->profile);
    free(f->list_extra);
    free(f);
}

/* The "held" sandboxes not destroyed since, as their principals'. */
static sbx_status
fake_list_held(void *state, void (*held)(void *arg, const char *sandbox_id, const char *subject),
               void *arg, sbx_error *err)
{
    struct sbx_fake *f = state;
    if (f->fail_list)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "fake: listing failed (fault injected by "
                             "fail_list)");
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->held_ids.n; i++)
        if (box_find(f, f->held_ids.items[i], NULL) != NULL)
            held(arg, f->held_ids.items[i], f->held_subjects.items[i]);
    pthread_mutex_unlock(&f->mu);
    return SBX_OK;
}

static void fake_capabilities(void *state, sbx_capabilities *caps)
{
    const struct sbx_fake *f = state;
    sbx_capabilities *src = f->caps;
    for (size_t i = 0; i < src->n_languages; i++)
        sbx_add_string(&caps->n_languages, &caps->languages, src->languages[i]);
    caps->isolation = src->isolation;
    caps->shell = src->shell;
    caps->files = src->files;
    caps->package_install = src->package_install;
    caps->stateful = src->stateful;
    caps->attach = src->attach;
    caps->provisions = src->provisions;
    caps->attaches_external = src->attaches_external;
    caps->principal_user = src->principal_user;
    caps->policy_network = src->policy_network;
    caps->policy_network_domains = src->policy_network_domains;
    caps->policy_filesystem = src->policy_filesystem;
    caps->policy_resources = src->policy_resources;
    caps->streaming = src->streaming;
    caps->expose = src->expose;
}

static sbx_status handle_for(struct sbx_fake *f, fake_box *b, sbx_sandbox **out, sbx_error *err)
{
    fake_handle *h = calloc(1, sizeof(*h));
    if (h == NULL || (h->base.id = strdup(b->id)) == NULL) {
        free(h);
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    }
    h->f = f;
    h->box = b;
    b->refs++;
    *out = &h->base;
    return SBX_OK;
}

static sbx_status fake_create(void *state, const sbx_session_handle *session,
                              const sbx_principal *principal, const sbx_policy *policy,
                              sbx_sandbox **out, sbx_error *err)
{
    (void)session;
    (void)principal;
    (void)policy;
    struct sbx_fake *f = state;
    *out = NULL;
    pthread_mutex_lock(&f->mu);
    sbx_status st = SBX_OK;
    if (f->fail_create) {
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "fake: create failed (fault injected by fail_create)");
        goto out;
    }
    if (f->n_boxes == f->cap_boxes) {
        size_t cap = f->cap_boxes ? f->cap_boxes * 2 : 64;
        fake_box **grown = realloc(f->boxes, cap * sizeof(*grown));
        if (grown == NULL) {
            st = sbx_error_set(err, SBX_E_PROVISION, "fake: out of memory creating a sandbox");
            goto out;
        }
        f->boxes = grown;
        f->cap_boxes = cap;
    }
    char id[32];
    snprintf(id, sizeof(id), "fk-%zu", f->n_boxes + 1);
    fake_box *b = box_new(id);
    if (b == NULL || !sbx_strlist_add(&f->created, id)) {
        box_free(b);
        st = sbx_error_set(err, SBX_E_PROVISION, "fake: out of memory creating a sandbox");
        goto out;
    }
    f->boxes[f->n_boxes++] = b;
    st = handle_for(f, b, out, err);
out:
    pthread_mutex_unlock(&f->mu);
    return st;
}

static sbx_status fake_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                              const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    (void)principal;
    (void)policy;
    struct sbx_fake *f = state;
    *out = NULL;
    pthread_mutex_lock(&f->mu);
    bool stalls = f->attach_stalls;
    pthread_mutex_unlock(&f->mu);
    if (stalls) { /* a live sandbox that does not answer (a paused agent): until the deadline */
        int64_t until = sbx_provider_step_deadline(FAKE_ATTACH_STALL_MS);
        while (sbx_monotonic_ms() < until) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        return sbx_error_set(err, SBX_E_TIMEOUT, "fake: sandbox '%s' does not answer (stalled)",
                             sandbox_id);
    }
    pthread_mutex_lock(&f->mu);
    fake_box *b = f->gone ? NULL : box_find(f, sandbox_id, NULL);
    sbx_status st =
        b != NULL ? handle_for(f, b, out, err)
                  : sbx_error_set(err, SBX_E_GONE, "fake: sandbox '%s' does not exist", sandbox_id);
    pthread_mutex_unlock(&f->mu);
    return st;
}

static sbx_status fake_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    struct sbx_fake *f = state;
    pthread_mutex_lock(&f->mu);
    f->destroy_calls++;
    if (f->fail_destroys > 0) {
        f->fail_destroys--;
        pthread_mutex_unlock(&f->mu);
        return sbx_error_set(err, SBX_E_PROVISION, "fake: destroy of '%s' failed (fault injected)",
                             sandbox_id);
    }
    fake_box **slot = NULL;
    if (box_find(f, sandbox_id, &slot) != NULL) {
        sbx_strlist_add(&f->destroyed, sandbox_id);
        box_kill(slot);
    }
    pthread_mutex_unlock(&f->mu);
    return SBX_OK;
}

/* ExposePort: nothing listens; the URL names the sandbox and the port, the same each time. */
static sbx_status fake_expose(void *state, const char *sandbox_id, uint32_t port, char **url,
                              char **token, sbx_error *err)
{
    struct sbx_fake *f = state;
    pthread_mutex_lock(&f->mu);
    f->ops++;
    bool alive = box_find(f, sandbox_id, NULL) != NULL;
    pthread_mutex_unlock(&f->mu);
    if (!alive)
        return sbx_error_set(err, SBX_E_GONE, "fake: sandbox '%s' is gone", sandbox_id);
    char buf[256];
    snprintf(buf, sizeof(buf), "http://expose.fake.invalid/%s/%u/", sandbox_id, port);
    *url = strdup(buf);
    *token = NULL;
    if (f->expose_token) {
        snprintf(buf, sizeof(buf), "token-%s", sandbox_id);
        *token = strdup(buf);
    }
    if (*url == NULL || (f->expose_token && *token == NULL)) {
        free(*url);
        free(*token);
        *url = *token = NULL;
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    }
    return SBX_OK;
}

static void fake_sandbox_close(sbx_sandbox *sb)
{
    fake_handle *h = (fake_handle *)sb;
    if (h == NULL)
        return;
    struct sbx_fake *f = h->f;
    pthread_mutex_lock(&f->mu);
    fake_box *b = h->box;
    if (--b->refs == 0 && !b->alive) {
        /* Find its cell so the table forgets it. */
        for (size_t i = 0; i < f->n_boxes; i++)
            if (f->boxes[i] == b)
                f->boxes[i] = NULL;
        for (size_t i = 0; i < f->n_external; i++)
            if (f->external[i] == b)
                f->external[i] = NULL;
        box_free(b);
    }
    pthread_mutex_unlock(&f->mu);
    free(h->base.id);
    free(h);
}

/* ---- operations --------------------------------------------------------------------------- */

/* Brackets every operation: bookkeeping, the injected delay, the box's content lock. */
static bool op_begin(fake_handle *h, const sbx_exec_opts *o)
{
    struct sbx_fake *f = h->f;
    pthread_mutex_lock(&f->mu);
    f->ops++;
    f->last_deadline = o->deadline_mono_ms;
    if (++h->box->running > 1)
        f->overlap = true;
    if (++f->running > f->max_parallel)
        f->max_parallel = f->running;
    int64_t slow = f->slow_ms;
    pthread_mutex_unlock(&f->mu);
    bool in_time = slow <= 0 || fake_sleep_ms(slow, o);
    /* The gate holds operations until a test opens it (deadline-aware). */
    while (in_time && atomic_load(&f->gate_closed))
        in_time = fake_sleep_ms(1, o);
    pthread_mutex_lock(&h->box->mu);
    return in_time;
}

static void op_end(fake_handle *h)
{
    pthread_mutex_unlock(&h->box->mu);
    pthread_mutex_lock(&h->f->mu);
    h->box->running--;
    h->f->running--;
    pthread_mutex_unlock(&h->f->mu);
}

static sbx_status timed_out(sbx_result *res, sbx_error *err)
{
    res->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
    res->signal = 9;
    return sbx_error_set(err, SBX_E_TIMEOUT, "fake: operation exceeded its deadline");
}

static sbx_status fake_op_run_code(sbx_sandbox *sb, const Sbx__V1__RunCode *op,
                                   const sbx_exec_opts *o, sbx_result *res, sbx_error *err)
{
    fake_handle *h = (fake_handle *)sb;
    sbx_status st = op_begin(h, o) ? fake_run_code(h->box, op, o, res, err) : timed_out(res, err);
    op_end(h);
    return st;
}

static sbx_status fake_op_run_command(sbx_sandbox *sb, const Sbx__V1__RunCommand *op,
                                      const sbx_exec_opts *o, sbx_result *res, sbx_error *err)
{
    fake_handle *h = (fake_handle *)sb;
    sbx_status st =
        op_begin(h, o) ? fake_run_command(h->box, op, o, res, err) : timed_out(res, err);
    op_end(h);
    return st;
}

static sbx_status fake_install_packages(sbx_sandbox *sb, const Sbx__V1__InstallPackages *op,
                                        const sbx_exec_opts *o, sbx_result *res, sbx_error *err)
{
    fake_handle *h = (fake_handle *)sb;
    sbx_status st = SBX_OK;
    if (!op_begin(h, o)) {
        st = timed_out(res, err);
    } else {
        sbx_append_bytes(&res->stdout, "installed:", 10);
        for (size_t i = 0; i < op->n_packages; i++) {
            sbx_append_bytes(&res->stdout, " ", 1);
            sbx_append_bytes(&res->stdout, op->packages[i], strlen(op->packages[i]));
        }
        sbx_append_bytes(&res->stdout, "\n", 1);
        res->outcome = SBX__V1__OUTCOME__OUTCOME_OK;
    }
    op_end(h);
    return st;
}

/* "/workspace/x" for "x"; refuses ".." so a test can see the same refusal real providers give. */
static char *normalize_path(const char *path, sbx_error *err)
{
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), "%s%s", path[0] == '/' ? "" : "/workspace/", path);
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "fake: path '%.64s...' is too long", path);
        return NULL;
    }
    char out[2048];
    size_t o = 0;
    char *save = NULL;
    for (char *seg = strtok_r(buf, "/", &save); seg != NULL; seg = strtok_r(NULL, "/", &save)) {
        if (strcmp(seg, ".") == 0)
            continue;
        if (strcmp(seg, "..") == 0) {
            sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                          "fake: path '%s' contains '..'; use a path without it", path);
            return NULL;
        }
        o += (size_t)snprintf(out + o, sizeof(out) - o, "/%s", seg);
    }
    if (o == 0)
        snprintf(out, sizeof(out), "/");
    return strdup(out);
}

fake_file *fake_file_find(fake_box *b, const char *path)
{
    char *norm = normalize_path(path, NULL);
    fake_file *found = NULL;
    for (size_t i = 0; norm != NULL && i < b->n_files && found == NULL; i++)
        if (strcmp(b->files[i].path, norm) == 0)
            found = &b->files[i];
    free(norm);
    return found;
}

static sbx_status fake_write_file(sbx_sandbox *sb, const Sbx__V1__WriteFile *op,
                                  const sbx_exec_opts *o, sbx_result *res, sbx_error *err)
{
    fake_handle *h = (fake_handle *)sb;
    sbx_status st = SBX_OK;
    if (!op_begin(h, o)) {
        st = timed_out(res, err);
        goto out;
    }
    char *norm = normalize_path(op->path, err);
    if (norm == NULL) {
        st = SBX_E_INVALID_ARGUMENT;
        goto out;
    }
    fake_box *b = h->box;
    fake_file *f = fake_file_find(b, norm);
    if (f == NULL) {
        fake_file *grown = b->n_files < FAKE_FILES_MAX
                               ? realloc(b->files, (b->n_files + 1) * sizeof(*grown))
                               : NULL;
        if (grown == NULL) {
            free(norm);
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "fake: more than %d files",
                               FAKE_FILES_MAX);
            goto out;
        }
        b->files = grown;
        f = &b->files[b->n_files++];
        memset(f, 0, sizeof(*f));
        f->path = norm;
    } else {
        free(norm);
    }
    free(f->data);
    f->data = NULL;
    f->len = 0;
    if (op->content.len > 0 && (f->data = malloc(op->content.len)) != NULL) {
        memcpy(f->data, op->content.data, op->content.len);
        f->len = op->content.len;
    }
    f->mode = op->mode != 0 ? op->mode : 0644;
    f->mtime_ms = 0; /* deterministic: replays compare equal */
out:
    op_end(h);
    return st;
}

static sbx_status fake_read_file(sbx_sandbox *sb, const Sbx__V1__ReadFile *op,
                                 const sbx_exec_opts *o, sbx_result *res, sbx_error *err)
{
    fake_handle *h = (fake_handle *)sb;
    sbx_status st = SBX_OK;
    if (!op_begin(h, o)) {
        st = timed_out(res, err);
        goto out;
    }
    fake_file *f = fake_file_find(h->box, op->path);
    if (f == NULL) {
        st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "fake: no such file '%s' in sandbox %s",
                           op->path, h->base.id);
        goto out;
    }
    sbx_file *out_file = sbx_file_new();
    if (out_file == NULL) {
        st = sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
        goto out;
    }
    size_t off = op->offset < f->len ? (size_t)op->offset : f->len;
    size_t len = f->len - off;
    if (op->max_bytes > 0 && op->max_bytes < len)
        len = (size_t)op->max_bytes;
    sbx_set_string(&out_file->path, f->path);
    sbx_set_bytes(&out_file->content, f->data != NULL ? f->data + off : NULL, len);
    out_file->mode = f->mode;
    out_file->size = f->len;
    out_file->kind = SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
    sbx_result_add_file(res, out_file);
out:
    op_end(h);
    return st;
}

static sbx_status fake_list_files(sbx_sandbox *sb, const Sbx__V1__ListFiles *op,
                                  const sbx_exec_opts *o, sbx_result *res, sbx_error *err)
{
    fake_handle *h = (fake_handle *)sb;
    sbx_status st = SBX_OK;
    char *dir = NULL;
    if (!op_begin(h, o)) {
        st = timed_out(res, err);
        goto out;
    }
    if ((dir = normalize_path(op->path, err)) == NULL) {
        st = SBX_E_INVALID_ARGUMENT;
        goto out;
    }
    size_t dl = strcmp(dir, "/") == 0 ? 0 : strlen(dir);
    sbx_strlist seen = {0};
    for (size_t i = 0; i < h->box->n_files; i++) {
        const fake_file *f = &h->box->files[i];
        if (strncmp(f->path, dir, dl) != 0 || f->path[dl] != '/')
            continue;
        const char *rest = f->path + dl + 1;
        const char *slash = strchr(rest, '/');
        char entry[2048];
        snprintf(entry, sizeof(entry), "%.*s/%.*s", (int)dl, dir,
                 (int)(slash != NULL ? (size_t)(slash - rest) : strlen(rest)), rest);
        if (sbx_strlist_contains(&seen, entry))
            continue;
        sbx_strlist_add(&seen, entry);
        sbx_file *e = sbx_file_new();
        if (e == NULL)
            continue;
        sbx_set_string(&e->path, entry);
        e->kind = slash != NULL ? SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY
                                : SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
        e->mode = slash != NULL ? 0755 : f->mode;
        e->size = slash != NULL ? 0 : f->len;
        sbx_result_add_file(res, e);
    }
    sbx_strlist_clear(&seen);
    sbx_file *extra = h->f->list_extra != NULL ? sbx_file_new() : NULL;
    if (extra != NULL) {
        sbx_set_string(&extra->path, h->f->list_extra);
        extra->kind = SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
        extra->mode = 0644;
        sbx_result_add_file(res, extra);
    }
out:
    free(dir);
    op_end(h);
    return st;
}

const sbx_provider_ops sbx_provider_fake = {
    .name = "fake",
    .summary = "in-memory deterministic sandboxes for tests (no isolation, runs nothing)",
    /* In-memory sandboxes live in one worker process: host-local, like local and docker. */
    .traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES | SBX_PROVIDER_HOST_LOCAL,
    .options = fake_option_specs,
    .open = fake_open,
    .close = fake_close,
    .capabilities = fake_capabilities,
    .check_policy = NULL,
    .create = fake_create,
    .attach = fake_attach,
    .destroy = fake_destroy,
    .list_held = fake_list_held,
    .run_code = fake_op_run_code,
    .run_command = fake_op_run_command,
    .install_packages = fake_install_packages,
    .write_file = fake_write_file,
    .read_file = fake_read_file,
    .list_files = fake_list_files,
    .sandbox_close = fake_sandbox_close,
    .expose = fake_expose,
};

/* ---- test API (fake.h) -------------------------------------------------------------------- */

#define FAKE_LOCKED(f, expr)                                                                       \
    do {                                                                                           \
        pthread_mutex_lock(&(f)->mu);                                                              \
        expr;                                                                                      \
        pthread_mutex_unlock(&(f)->mu);                                                            \
    } while (0)

size_t sbx_fake_created_count(sbx_fake *f)
{
    size_t n;
    FAKE_LOCKED(f, n = f->created.n);
    return n;
}

size_t sbx_fake_destroyed_count(sbx_fake *f)
{
    size_t n;
    FAKE_LOCKED(f, n = f->destroyed.n);
    return n;
}

size_t sbx_fake_destroy_calls(sbx_fake *f)
{
    size_t n;
    FAKE_LOCKED(f, n = f->destroy_calls);
    return n;
}

bool sbx_fake_was_created(sbx_fake *f, const char *id)
{
    bool r;
    FAKE_LOCKED(f, r = sbx_strlist_contains(&f->created, id));
    return r;
}

bool sbx_fake_was_destroyed(sbx_fake *f, const char *id)
{
    bool r;
    FAKE_LOCKED(f, r = sbx_strlist_contains(&f->destroyed, id));
    return r;
}

bool sbx_fake_alive(sbx_fake *f, const char *id)
{
    bool r;
    FAKE_LOCKED(f, r = box_find(f, id, NULL) != NULL);
    return r;
}

void sbx_fake_vanish(sbx_fake *f, const char *id)
{
    pthread_mutex_lock(&f->mu);
    fake_box **slot = NULL;
    if (box_find(f, id, &slot) != NULL)
        box_kill(slot);
    pthread_mutex_unlock(&f->mu);
}

void sbx_fake_set_fail_create(sbx_fake *f, bool on)
{
    FAKE_LOCKED(f, f->fail_create = on);
}

void sbx_fake_fail_destroys(sbx_fake *f, int n)
{
    FAKE_LOCKED(f, f->fail_destroys = n);
}

void sbx_fake_set_gone(sbx_fake *f, bool on)
{
    FAKE_LOCKED(f, f->gone = on);
}

void sbx_fake_set_attach_stalls(sbx_fake *f, bool on)
{
    FAKE_LOCKED(f, f->attach_stalls = on);
}

void sbx_fake_set_gate(sbx_fake *f, bool closed)
{
    atomic_store(&f->gate_closed, closed);
}

void sbx_fake_set_slow_ms(sbx_fake *f, int64_t ms)
{
    FAKE_LOCKED(f, f->slow_ms = ms);
}

int64_t sbx_fake_last_deadline(sbx_fake *f)
{
    int64_t d;
    FAKE_LOCKED(f, d = f->last_deadline);
    return d;
}

int sbx_fake_max_parallel(sbx_fake *f)
{
    int n;
    FAKE_LOCKED(f, n = f->max_parallel);
    return n;
}

bool sbx_fake_overlap_seen(sbx_fake *f)
{
    bool r;
    FAKE_LOCKED(f, r = f->overlap);
    return r;
}

uint64_t sbx_fake_ops(sbx_fake *f)
{
    uint64_t n;
    FAKE_LOCKED(f, n = f->ops);
    return n;
}
