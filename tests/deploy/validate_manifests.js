#!/usr/bin/env node
// validate_manifests.js - deploy/kubernetes checked without a cluster (none can run here):
//
//  1. every document of every manifest against the Kubernetes OpenAPI schema, through the
//     validators npm's kubernetes-models ships (types, required fields, formats such as
//     quantities and ports), plus what that schema lets through: a field the schema does not
//     know (a typo like `readinessProbes`) is an error here, as `kubectl apply
//     --validate=strict` would make it;
//  2. the references between the objects, which a schema cannot see: selectors match the pod
//     labels, Service target ports and probe ports are container ports, every ConfigMap and
//     Secret key that is mounted or read exists, the RoleBinding names the Deployment's
//     ServiceAccount, kustomization.yaml lists every manifest but the Secrets;
//  3. what sbx promises about them: every container hardened (non-root, no privilege
//     escalation, capabilities dropped, read-only root), resources requested and limited, the
//     RBAC namespaced and no wider than what the provider calls (pods, pods/exec, secrets,
//     networkpolicies, each with its verbs), probes that are exec probes of the image's health
//     probe, a grace period above the drain;
//  4. the worker configuration inside the ConfigMap with the real `sbx config check`, and its
//     paths, port and token variables against the Deployment's mounts, ports and env;
//  5. where a kubectl is installed, `kubectl kustomize` renders every object (offline).
//
// What it cannot check: admission (Pod Security, quotas), the API server's defaulting and
// immutable fields, and the provider's real use of the RBAC; the image test (image_test.py)
// starts the image with this very configuration and these mounts.
//
// usage: node validate_manifests.js --manifests DIR --node-modules DIR --sbx PATH [--self-test]
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

function arg(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error('usage: validate_manifests.js --manifests DIR --node-modules DIR --sbx PATH ' +
                  `[--self-test] (missing ${name})`);
    process.exit(2);
  }
  return process.argv[i + 1];
}
const manifestDir = arg('--manifests');
const modules = arg('--node-modules');
const sbxBin = arg('--sbx');
const selfTest = process.argv.includes('--self-test');

function need(mod) {
  try {
    return require(path.join(modules, mod));
  } catch (e) {
    console.error(`validate_manifests: cannot load ${mod} from ${modules}: ${e.message}\n` +
                  'run scripts/install-deps.sh (it installs the npm test packages there, or ' +
                  'into $SBX_NODE_DIR)');
    process.exit(1);
  }
}
const YAML = need('yaml');
const { runValidateFunc } = need('@kubernetes-models/validate');

// The health probe the image installs (deploy/image/make-rootfs.sh) and the user it runs as.
const PROBE = '/usr/libexec/sbx/sbx-health-probe';
const WORKER_UID = 10001;
// What the kubernetes provider does (providers/kubernetes: a Secret, a NetworkPolicy and a pod per
// sandbox, polled, deleted, and listed by its sweep; pods/exec for attached pods), and where.
const SANDBOX_NAMESPACE = 'sbx-sandboxes';
const ALLOWED_RULES = {
  '/pods': ['create', 'delete', 'get', 'list'],
  '/pods/exec': ['create', 'get'],
  '/secrets': ['create', 'delete', 'list'],
  'networking.k8s.io/networkpolicies': ['create', 'delete', 'list'],
};
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);

// ---- schema validation with unknown fields refused -----------------------------------------

function schemaModule(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['core', apiVersion];
  const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);
  const name = `IoK8sApi${cap(group.split('.')[0])}${cap(version)}${kind}`;
  const file = path.join(modules, 'kubernetes-models', '_schemas', name + '.js');
  return fs.existsSync(file) ? require(file).validate : null;
}

// The compiled schema validators read every property the schema defines (and iterate the maps
// it allows), so a property they never read is one the schema does not know.
function unknownFields(validate, doc) {
  const read = new Set();
  const own = (o, k) => typeof k === 'string' && Object.prototype.hasOwnProperty.call(o, k);
  const wrap = (v, at) => {
    if (v === null || typeof v !== 'object')
      return v;
    return new Proxy(v, {
      get(t, k, r) {
        const x = Reflect.get(t, k, r);
        if (!own(t, k))
          return x;
        read.add(at + '/' + k);
        return wrap(x, at + '/' + k);
      },
    });
  };
  try {
    validate(wrap(doc, ''));
  } catch (e) {
    return []; // reported by the validation proper
  }
  const unknown = [];
  const walk = (v, at) => {
    if (v === null || typeof v !== 'object')
      return;
    for (const k of Object.keys(v)) {
      const p = at + '/' + k;
      if (!read.has(p))
        unknown.push(p);
      else
        walk(v[k], p);
    }
  };
  walk(doc, '');
  return unknown;
}

// ---- the checks ------------------------------------------------------------------------------

function loadManifests(dir) {
  const docs = [];
  const errors = [];
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort();
  for (const f of files) {
    if (f === 'kustomization.yaml')
      continue;
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    const parsed = YAML.parseAllDocuments(text, { merge: false });
    parsed.forEach((d, i) => {
      for (const e of d.errors)
        errors.push(`${f} document ${i + 1}: YAML: ${e.message}`);
      const obj = d.toJS({ maxAliasCount: 0 });
      if (obj !== null)
        docs.push({ file: f, index: i + 1, obj });
    });
  }
  return { docs, files, errors };
}

function checkAll(dir) {
  const errors = [];
  const { docs, files, errors: yamlErrors } = loadManifests(dir);
  errors.push(...yamlErrors);
  const where = (d) => `${d.file} ${d.obj.kind || '?'}/${(d.obj.metadata || {}).name || '?'}`;
  const fail = (d, msg) => errors.push(`${where(d)}: ${msg}`);

  // 1. schema
  for (const d of docs) {
    const { apiVersion, kind } = d.obj;
    if (typeof apiVersion !== 'string' || typeof kind !== 'string') {
      fail(d, 'apiVersion and kind are required');
      continue;
    }
    const validate = schemaModule(apiVersion, kind);
    if (!validate) {
      fail(d, `${apiVersion} ${kind} is not a kind of the Kubernetes API`);
      continue;
    }
    try {
      runValidateFunc(validate, d.obj);
    } catch (e) {
      fail(d, 'schema: ' + e.message);
      continue;
    }
    for (const u of unknownFields(validate, d.obj))
      fail(d, `unknown field ${u} (not in the ${apiVersion} ${kind} schema)`);
    if (!CLUSTER_SCOPED.has(kind) && !d.obj.metadata.namespace)
      fail(d, 'a namespaced object without metadata.namespace');
  }
  if (errors.length)
    return errors; // the rest assumes well-formed objects

  const of = (kind) => docs.filter((d) => d.obj.kind === kind);
  const find = (kind, ns, name) =>
    docs.find((d) => d.obj.kind === kind && d.obj.metadata.name === name &&
                     (CLUSTER_SCOPED.has(kind) || d.obj.metadata.namespace === ns));
  const namespaces = new Set(of('Namespace').map((d) => d.obj.metadata.name));
  for (const d of docs)
    if (d.obj.metadata.namespace && !namespaces.has(d.obj.metadata.namespace))
      fail(d, `namespace ${d.obj.metadata.namespace} is not created by namespace.yaml`);

  // 2 and 3. workloads
  const workloads = of('Deployment').concat(of('StatefulSet'));
  if (workloads.length !== 1)
    errors.push(`expected one worker Deployment or StatefulSet, found ${workloads.length}`);
  for (const w of workloads) {
    const ns = w.obj.metadata.namespace;
    const spec = w.obj.spec;
    const pod = spec.template.spec;
    const labels = spec.template.metadata.labels || {};
    for (const [k, v] of Object.entries(spec.selector.matchLabels || {}))
      if (labels[k] !== v)
        fail(w, `selector ${k}=${v} does not match the pod template's labels`);
    const sa = pod.serviceAccountName;
    if (!sa || !find('ServiceAccount', ns, sa))
      fail(w, `serviceAccountName '${sa}' is not a ServiceAccount of these manifests`);
    const psc = pod.securityContext || {};
    if (psc.runAsNonRoot !== true || psc.runAsUser !== WORKER_UID)
      fail(w, `the pod must run as non-root uid ${WORKER_UID} (the image's sbx user)`);
    if (!psc.seccompProfile || psc.seccompProfile.type !== 'RuntimeDefault')
      fail(w, 'the pod must use the RuntimeDefault seccomp profile');
    const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
    const containers = (pod.initContainers || []).concat(pod.containers);
    const ports = new Map();
    for (const c of pod.containers)
      for (const p of c.ports || []) {
        ports.set(p.name, p.containerPort);
        ports.set(p.containerPort, p.containerPort);
      }
    for (const c of containers) {
      const sc = c.securityContext || {};
      if (sc.allowPrivilegeEscalation !== false || sc.readOnlyRootFilesystem !== true ||
          !sc.capabilities || JSON.stringify(sc.capabilities.drop) !== '["ALL"]' ||
          sc.privileged || (sc.capabilities.add || []).length)
        fail(w, `container ${c.name}: needs allowPrivilegeEscalation false, ` +
                'readOnlyRootFilesystem true, capabilities drop [ALL] and nothing added');
      const r = c.resources || {};
      for (const k of ['cpu', 'memory'])
        if (!(r.requests || {})[k] || !(r.limits || {})[k])
          fail(w, `container ${c.name}: resources.requests and limits need ${k}`);
      for (const m of c.volumeMounts || [])
        if (!volumes.has(m.name))
          fail(w, `container ${c.name}: volumeMount ${m.name} names no volume`);
      for (const e of c.env || []) {
        const ref = e.valueFrom && e.valueFrom.secretKeyRef;
        if (ref && !secretHasKey(find('Secret', ns, ref.name), ref.key))
          fail(w, `container ${c.name}: env ${e.name} reads Secret ${ref.name} key ${ref.key}, ` +
                  'which secret.yaml does not define');
      }
    }
    for (const c of pod.containers)
      for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
        const p = c[kind];
        if (!p) {
          fail(w, `container ${c.name} has no ${kind}`);
          continue;
        }
        if (!p.exec || p.exec.command[0] !== PROBE)
          fail(w, `container ${c.name}: ${kind} must exec ${PROBE} (native gRPC probes are ` +
                  'plaintext and the worker serves TLS only off loopback)');
      }
    for (const v of volumes.values()) {
      if (v.configMap) {
        const cm = find('ConfigMap', ns, v.configMap.name);
        if (!cm)
          fail(w, `volume ${v.name}: ConfigMap ${v.configMap.name} is not in these manifests`);
        for (const it of v.configMap.items || [])
          if (cm && !(it.key in (cm.obj.data || {})))
            fail(w, `volume ${v.name}: ConfigMap ${v.configMap.name} has no key ${it.key}`);
      }
      if (v.secret) {
        const s = find('Secret', ns, v.secret.secretName);
        if (!s)
          fail(w, `volume ${v.name}: Secret ${v.secret.secretName} is not in these manifests`);
        for (const it of v.secret.items || [])
          if (s && !secretHasKey(s, it.key))
            fail(w, `volume ${v.name}: Secret ${v.secret.secretName} has no key ${it.key}`);
      }
    }
    for (const svc of of('Service').filter((s) => s.obj.metadata.namespace === ns)) {
      for (const [k, v] of Object.entries(svc.obj.spec.selector || {}))
        if (labels[k] !== v)
          fail(svc, `selector ${k}=${v} selects no pod of ${where(w)}`);
      for (const p of svc.obj.spec.ports)
        if (!ports.has(p.targetPort === undefined ? p.port : p.targetPort))
          fail(svc, `port ${p.name}: targetPort ${p.targetPort} is no container port`);
    }
    for (const np of of('NetworkPolicy').filter((n) => n.obj.metadata.namespace === ns))
      for (const rule of np.obj.spec.ingress || [])
        for (const p of rule.ports || [])
          if (!ports.has(p.port))
            fail(np, `ingress port ${p.port} is no container port of the workers`);
    checkWorkerConfig(docs, w, volumes, ports, fail);
  }

  // RBAC
  for (const k of ['ClusterRole', 'ClusterRoleBinding'])
    for (const d of of(k))
      fail(d, 'nothing cluster-wide: the worker needs a Role in the sandbox namespace only');
  for (const role of of('Role')) {
    if (role.obj.metadata.namespace !== SANDBOX_NAMESPACE)
      fail(role, `a Role outside the sandbox namespace ${SANDBOX_NAMESPACE}`);
    const granted = {};
    for (const rule of role.obj.rules) {
      if (rule.resourceNames || rule.nonResourceURLs)
        fail(role, 'resourceNames and nonResourceURLs are not expected');
      for (const g of rule.apiGroups || [''])
        for (const r of rule.resources || []) {
          const key = `${g}/${r}`;
          if (!ALLOWED_RULES[key]) {
            fail(role, `grants ${key}, which the kubernetes provider does not need`);
            continue;
          }
          for (const v of rule.verbs) {
            if (!ALLOWED_RULES[key].includes(v))
              fail(role, `grants ${v} on ${key}, which the kubernetes provider does not need`);
            (granted[key] = granted[key] || new Set()).add(v);
          }
        }
    }
    for (const [key, verbs] of Object.entries(ALLOWED_RULES))
      for (const v of verbs)
        if (!(granted[key] && granted[key].has(v)))
          fail(role, `does not grant ${v} on ${key}, which the kubernetes provider needs`);
  }
  for (const rb of of('RoleBinding')) {
    const ref = rb.obj.roleRef;
    if (ref.kind !== 'Role' || !find('Role', rb.obj.metadata.namespace, ref.name))
      fail(rb, `roleRef ${ref.kind}/${ref.name} is not a Role of its namespace here`);
    for (const s of rb.obj.subjects || [])
      if (s.kind !== 'ServiceAccount' ||
          !workloads.some((w) => w.obj.spec.template.spec.serviceAccountName === s.name &&
                                 w.obj.metadata.namespace === s.namespace))
        fail(rb, `subject ${s.kind}/${s.namespace}/${s.name} is not the workers' ServiceAccount`);
  }
  if (of('Role').length !== 1 || of('RoleBinding').length !== 1)
    errors.push('expected one Role and one RoleBinding (the sandbox namespace)');

  // Secrets hold no values in git
  for (const s of of('Secret'))
    for (const [k, v] of Object.entries(Object.assign({}, s.obj.data, s.obj.stringData)))
      if (v !== '')
        fail(s, `key ${k} holds a value: secrets are made with kubectl, not kept in git`);

  // kustomization.yaml
  const kfile = path.join(dir, 'kustomization.yaml');
  if (!fs.existsSync(kfile)) {
    errors.push('kustomization.yaml is missing');
  } else {
    const k = YAML.parse(fs.readFileSync(kfile, 'utf8'));
    const listed = new Set(k.resources || []);
    const secretFiles = new Set(of('Secret').map((d) => d.file));
    for (const f of files)
      if (f !== 'kustomization.yaml' && !secretFiles.has(f) && !listed.has(f))
        errors.push(`kustomization.yaml does not list ${f}`);
    for (const f of listed)
      if (!files.includes(f))
        errors.push(`kustomization.yaml lists ${f}, which does not exist`);
      else if (secretFiles.has(f))
        errors.push(`kustomization.yaml lists ${f}, whose Secrets are empty placeholders`);
  }
  return errors;
}

function secretHasKey(secret, key) {
  return !!secret && (key in (secret.obj.data || {}) || key in (secret.obj.stringData || {}));
}

// The worker.yaml of the ConfigMap: valid for the real sbx, and consistent with the pod.
function checkWorkerConfig(docs, w, volumes, ports, fail) {
  const worker = w.obj.spec.template.spec.containers[0];
  const args = worker.args || [];
  const i = args.indexOf('--config');
  if (i < 0) {
    fail(w, 'the worker container has no --config argument');
    return;
  }
  const configPath = args[i + 1];
  const mountOf = (p) =>
    (worker.volumeMounts || []).filter((m) => p === m.mountPath || p.startsWith(m.mountPath + '/'))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  const m = mountOf(configPath);
  const vol = m && volumes.get(m.name);
  if (!vol || !vol.configMap) {
    fail(w, `--config ${configPath} is not in a ConfigMap mount`);
    return;
  }
  const cm = docs.find((d) => d.obj.kind === 'ConfigMap' &&
                                   d.obj.metadata.name === vol.configMap.name);
  const rel = path.relative(m.mountPath, configPath);
  const item = (vol.configMap.items || []).find((it) => it.path === rel);
  const key = item ? item.key : rel;
  const text = cm && cm.obj.data && cm.obj.data[key];
  if (typeof text !== 'string') {
    fail(w, `--config ${configPath}: ConfigMap ${vol.configMap.name} has no key ${key}`);
    return;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-deploy-'));
  let resolved;
  try {
    fs.writeFileSync(path.join(tmp, 'worker.yaml'), text);
    resolved = JSON.parse(execFileSync(sbxBin, ['--json', 'config', 'check',
                                                 path.join(tmp, 'worker.yaml')],
                                       { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
  } catch (e) {
    fail(cm, `sbx config check refuses ${key}: ${(e.stderr || e.message).trim()}`);
    return;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  if (!quiet)
    console.log(`ok   sbx config check accepts ConfigMap ${vol.configMap.name} key ${key}`);
  const wc = resolved.worker;
  const port = Number(wc.listen.split(':').pop());
  if (ports.get('grpc') !== port)
    fail(w, `the container port grpc (${ports.get('grpc')}) is not worker.listen's ${port}`);
  const raw = YAML.parse(text).sandbox.worker;
  if (raw.metrics_listen && ports.get('metrics') !== Number(raw.metrics_listen.split(':').pop()))
    fail(w, `the container port metrics is not worker.metrics_listen's`);
  const grace = w.obj.spec.template.spec.terminationGracePeriodSeconds;
  const drainS = ((raw.drain_notice_ms || 0) + (wc.drain_timeout_ms || 0)) / 1000;
  if (!(grace > drainS))
    fail(w, `terminationGracePeriodSeconds ${grace} is not above the drain (${drainS} s)`);
  const env = new Set((worker.env || []).map((e) => e.name));
  const wanted = wc.callers.map((c) => c.token_env).filter(Boolean);
  for (const p of resolved.profiles)
    for (const [k, v] of Object.entries(p.options || {}))
      if (k.endsWith('_env') && v)
        wanted.push(v);
  for (const name of wanted)
    if (!env.has(name))
      fail(w, `the config reads $${name}, which the worker container does not set`);
  // kubernetes profiles: sandboxes where the Role is, the agent from the workers' own image,
  // and a worker_selector that selects the workers (else the agent port is closed to them).
  const labels = w.obj.spec.template.metadata.labels || {};
  for (const p of resolved.profiles.filter((x) => x.provider === 'kubernetes')) {
    const o = p.options;
    if (o.namespace !== SANDBOX_NAMESPACE)
      fail(cm, `profile ${p.name}: namespace ${o.namespace} is not ${SANDBOX_NAMESPACE}, ` +
               'where rbac.yaml grants the provider its calls');
    if (o.agent_image !== worker.image)
      fail(cm, `profile ${p.name}: agent_image ${o.agent_image} is not the workers' image ` +
               `${worker.image} (which holds ${o.agent_image_path})`);
    for (const kv of o.worker_selector || []) {
      const [k, v] = kv.split('=');
      if (labels[k] !== v)
        fail(cm, `profile ${p.name}: worker_selector ${kv} does not select the worker pods`);
    }
    if (o.kubeconfig)
      fail(cm, `profile ${p.name}: a kubeconfig; in the cluster the service account is used`);
  }
  const files = [['worker.tls.cert_file', wc.tls_cert_file, 'secret'],
                 ['worker.tls.key_file', wc.tls_key_file, 'secret'],
                 ['sandbox.secret_file', resolved.secret_file, 'emptyDir']];
  for (const [name, p, kind] of files) {
    const mm = p && mountOf(p);
    if (!mm || !volumes.get(mm.name)[kind])
      fail(w, `${name} ${p} is not on a ${kind} volume mount of the worker container`);
  }
  // The binding key: written by an init container (a Secret volume holds symlinks, which the
  // worker refuses) into the emptyDir the worker reads.
  const keyMount = mountOf(resolved.secret_file);
  const writer = (w.obj.spec.template.spec.initContainers || []).find((c) =>
    (c.volumeMounts || []).some((x) => keyMount && x.name === keyMount.name && !x.readOnly));
  if (!writer)
    fail(w, 'no init container writes the binding key into the worker\'s emptyDir');
  else if (!(writer.command || []).join(' ').includes(path.basename(resolved.secret_file)))
    fail(w, `init container ${writer.name} does not write ${resolved.secret_file}`);
  if (!(writer && (writer.command || []).join(' ').includes('0600')))
    fail(w, 'the binding key must be written mode 0600 (the worker refuses a readable key)');
}

let quiet = false; // the self-test's runs print only their verdict

// `kubectl kustomize` (offline: it only reads the files) renders what `kubectl apply -k` would
// apply: every object of the manifests but the Secrets, with the image tag of kustomization.yaml.
// Where no kubectl is installed (Debian has none), this part is skipped with a message.
function checkKustomize(dir) {
  const which = (() => {
    for (const d of (process.env.PATH || '').split(':'))
      if (d && fs.existsSync(path.join(d, 'kubectl')))
        return path.join(d, 'kubectl');
    return null;
  })();
  if (!which) {
    console.log('skip kubectl kustomize: no kubectl on PATH');
    return [];
  }
  let out;
  try {
    out = execFileSync(which, ['kustomize', dir], { encoding: 'utf8', timeout: 60000,
                                                    stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    return [`kubectl kustomize ${dir} failed: ${(e.stderr || e.message).trim()}`];
  }
  const errors = [];
  const key = (o) => `${o.kind}/${(o.metadata || {}).namespace || ''}/${(o.metadata || {}).name}`;
  const rendered = YAML.parseAllDocuments(out).map((d) => d.toJS()).filter(Boolean);
  const got = new Set(rendered.map(key));
  const k = YAML.parse(fs.readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8'));
  const tag = (k.images || []).find((i) => i.name === 'sbx-worker');
  for (const d of loadManifests(dir).docs)
    if (d.obj.kind !== 'Secret' && !got.has(key(d.obj)))
      errors.push(`kubectl kustomize does not render ${key(d.obj)}`);
  for (const o of rendered)
    if (o.kind === 'Deployment')
      for (const c of o.spec.template.spec.initContainers.concat(o.spec.template.spec.containers))
        if (tag && c.image !== `sbx-worker:${tag.newTag}`)
          errors.push(`kubectl kustomize renders image ${c.image}, not sbx-worker:${tag.newTag}`);
  if (!errors.length)
    console.log(`ok   kubectl kustomize renders the ${rendered.length} objects (${which})`);
  return errors;
}

// ---- main -------------------------------------------------------------------------------------

const errors = checkAll(manifestDir).concat(checkKustomize(manifestDir));
for (const e of errors)
  console.log('FAIL ' + e);
let passed = errors.length === 0 ? 1 : 0;
let failed = errors.length === 0 ? 0 : 1;
if (errors.length === 0)
  console.log(`ok   ${fs.readdirSync(manifestDir).length} files of ${manifestDir} validated`);

// --self-test: the checks catch the mistakes they are for (each applied to a copy).
if (selfTest) {
  quiet = true;
  const mutations = [
    ['deployment.yaml', 'readinessProbe:', 'readinessProbes:', 'unknown field'],
    ['deployment.yaml', 'failureThreshold: 30', 'failureThreshold: "30"', 'must be integer'],
    ['deployment.yaml', 'memory: 1Gi', 'memory: 1Gx', 'quantity'],
    ['deployment.yaml', 'readOnlyRootFilesystem: true', 'readOnlyRootFilesystem: false',
     'readOnlyRootFilesystem'],
    ['deployment.yaml', 'key: token-agents', 'key: token-agent', 'does not define'],
    ['deployment.yaml', 'terminationGracePeriodSeconds: 45', 'terminationGracePeriodSeconds: 30',
     'above the drain'],
    ['deployment.yaml', 'chmod 0600', 'chmod 0644', 'mode 0600'],
    ['service.yaml', 'targetPort: metrics', 'targetPort: metric', 'no container port'],
    ['rbac.yaml', 'resources: [pods/exec]', 'resources: [pods/exec, configmaps]', 'configmaps'],
    ['rbac.yaml', 'verbs: [list, create, delete]', 'verbs: [list, create, delete, watch]', 'watch'],
    ['rbac.yaml', 'kind: Role\n', 'kind: ClusterRole\n', 'cluster-wide'],
    ['configmap.yaml', 'drain_timeout_ms: 30000', 'drain_timeout_msx: 30000',
     'sbx config check refuses'],
    ['configmap.yaml', 'listen: 0.0.0.0:7443', 'listen: 0.0.0.0:7444', 'worker.listen'],
    ['configmap.yaml', 'token_env: SBX_TOKEN_AGENTS', 'token_env: SBX_TOKEN_OTHER',
     'does not set'],
    ['configmap.yaml', 'namespace: sbx-sandboxes', 'namespace: default', 'where rbac.yaml'],
    ['configmap.yaml', 'agent_image: sbx-worker:0.1.0', 'agent_image: busybox:1',
     'agent_image busybox:1'],
    ['configmap.yaml', '[app.kubernetes.io/name=sbx-worker]', '[app=sbx-worker]',
     'does not select'],
    ['secret.yaml', 'token-agents: ""', 'token-agents: "hunter2"', 'holds a value'],
    ['kustomization.yaml', '  - service.yaml\n', '', 'does not list service.yaml'],
  ];
  for (const [file, from, to, expect] of mutations) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-deploy-mut-'));
    try {
      for (const f of fs.readdirSync(manifestDir))
        fs.copyFileSync(path.join(manifestDir, f), path.join(tmp, f));
      const text = fs.readFileSync(path.join(tmp, file), 'utf8');
      const name = `${file}: ${JSON.stringify(from)} -> ${JSON.stringify(to)} is caught`;
      if (!text.includes(from)) {
        console.log(`FAIL ${name}: the text is not in ${file}`);
        failed++;
        continue;
      }
      fs.writeFileSync(path.join(tmp, file), text.replace(from, to));
      const errs = checkAll(tmp);
      const ok = errs.some((e) => e.includes(expect));
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : ': got ' + JSON.stringify(errs)}`);
      if (ok)
        passed++;
      else
        failed++;
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
}
console.log(`validate_manifests: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
