#!/usr/bin/env node
// generic_clients.js - a real sbx-worker seen by generic gRPC clients nobody here wrote: npm's
// @grpc/grpc-js with grpc-js-reflection-client lists the services over server reflection
// (grpc.reflection.v1 and v1alpha), fetches their descriptors, and calls Describe and Execute
// with nothing but what reflection returned (no .proto file); grpc.health.v1.Health/Watch
// (through the same descriptors) sees SERVING, then NOT_SERVING once SIGTERM arrives, while
// the drain notice keeps the listener open (a fresh connection's Check says NOT_SERVING too),
// and the worker still exits 0.
//
// usage: node generic_clients.js --worker PATH/sbx-worker --node-modules DIR
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const SETPRIV = '/usr/bin/setpriv';

function arg(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error(`usage: generic_clients.js --worker PATH --node-modules DIR (missing ${name})`);
    process.exit(2);
  }
  return process.argv[i + 1];
}
const workerBin = arg('--worker');
const modules = arg('--node-modules');
const grpc = require(path.join(modules, '@grpc/grpc-js'));
const { GrpcReflection } = require(path.join(modules, 'grpc-js-reflection-client'));

const LOADER = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const results = [];
function check(name, ok, detail) {
  results.push({ name, ok });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok || detail === undefined ? '' : ': ' + detail}`);
}
function call(client, method, req) {
  return new Promise((resolve, reject) =>
    client[method](req, { deadline: Date.now() + 30000 }, (e, r) => (e ? reject(e) : resolve(r))));
}

function startWorker(dir) {
  const cfg = path.join(dir, 'worker.yaml');
  fs.writeFileSync(cfg, [
    'sandbox:',
    '  default_profile: fake',
    `  secret_file: ${dir}/secret`,
    `  runtime_dir: ${dir}/run`,
    '  broker: { flavor: thread, threads: 2 }',
    '  worker:',
    '    listen: 127.0.0.1:0',
    '    drain_notice_ms: 3000',
    '  profiles:',
    '    fake: { type: fake, scope: per_call }',
    ''].join('\n'));
  // Through setpriv (util-linux), which sets the worker's parent-death signal and execs it (same
  // pid): the worker dies with this script even when ctest's timeout kills it. Node has no
  // hook between fork and exec; the C and Python fixtures use tests/support/die_with_parent.*.
  const argv = [workerBin, '--config', cfg];
  if (fs.existsSync(SETPRIV)) {
    argv.unshift(SETPRIV, '--pdeathsig', 'KILL', '--');
  }
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d) => {
      buf += d.toString();
      const m = buf.match(/listening on port (\d+)/);
      if (m) {
        proc.stderr.off('data', onData);
        proc.stderr.resume();
        resolve({ proc, target: `127.0.0.1:${m[1]}` });
      }
    };
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`worker exited ${code} before listening: ${buf}`)));
  });
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-generic-'));
  const { proc, target } = await startWorker(dir);
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve({ code, sig })));
  const insecure = grpc.credentials.createInsecure();
  try {
    for (const version of ['v1', 'v1alpha']) {
      const r = new GrpcReflection(target, insecure, {}, version);
      const services = await r.listServices();
      for (const s of ['sbx.v1.Execution', 'grpc.health.v1.Health',
                       'grpc.reflection.v1.ServerReflection',
                       'grpc.reflection.v1alpha.ServerReflection'])
        check(`${version}: list_services has ${s}`, services.includes(s), JSON.stringify(services));
      const methods = (await r.listMethods('sbx.v1.Execution')).map((m) => m.name).sort();
      check(`${version}: sbx.v1.Execution methods`,
            JSON.stringify(methods) === JSON.stringify(['Describe', 'Execute', 'ExecuteStream']),
            JSON.stringify(methods));
      let missing = null;
      try { await r.getDescriptorBySymbol('sbx.v1.NoSuchThing'); } catch (e) { missing = e; }
      check(`${version}: an unknown symbol is an error`, missing !== null);
    }

    // Call the service from what reflection returned, without the .proto.
    const r = new GrpcReflection(target, insecure, {}, 'v1');
    const execPkg = (await r.getDescriptorBySymbol('sbx.v1.Execution')).getPackageObject(LOADER);
    const exec = new execPkg.sbx.v1.Execution(target, insecure);
    const d = await call(exec, 'Describe', {});
    check('Describe through reflection lists the fake profile',
          d.profiles.some((p) => p.name === 'fake' && p.provider === 'fake'), JSON.stringify(d));
    const c = await call(exec, 'Execute', {
      task_id: '6f1c2d4e-0000-4000-8000-000000000001', profile: 'fake',
      run_command: { shell: 'echo via reflection' } });
    check('Execute through reflection runs the command',
          c.status === 'COMPLETION_STATUS_SUCCEEDED' &&
          Buffer.from(c.result.stdout).toString() === 'via reflection\n', JSON.stringify(c));

    // Health/Watch, from the reflected grpc.health.v1 descriptors.
    const healthPkg = (await r.getDescriptorBySymbol('grpc.health.v1.Health')).getPackageObject(LOADER);
    const Health = healthPkg.grpc.health.v1.Health;
    const health = new Health(target, insecure);
    const check0 = await call(health, 'Check', { service: '' });
    check('Check says SERVING', check0.status === 'SERVING', JSON.stringify(check0));

    const unknown = health.Watch({ service: 'no.such.Service' });
    const unknownFirst = await new Promise((resolve) => unknown.once('data', resolve));
    check('Watch of an unknown service says SERVICE_UNKNOWN',
          unknownFirst.status === 'SERVICE_UNKNOWN', JSON.stringify(unknownFirst));
    unknown.cancel();
    unknown.on('error', () => {});

    const watch = health.Watch({ service: 'sbx.v1.Execution' });
    const seen = [];
    const ended = new Promise((resolve) => {
      watch.on('error', (e) => resolve(e.code));
      watch.on('end', () => resolve(0));
    });
    const gotNotServing = new Promise((resolve) => watch.on('data', (m) => {
      seen.push(m.status);
      if (m.status === 'NOT_SERVING') resolve();
    }));
    await new Promise((resolve) => {
      const wait = () => (seen.length > 0 ? resolve() : setTimeout(wait, 20));
      wait();
    });
    check('Watch starts with SERVING', seen[0] === 'SERVING', JSON.stringify(seen));

    proc.kill('SIGTERM');
    await gotNotServing;
    check('Watch turns NOT_SERVING on SIGTERM', seen[seen.length - 1] === 'NOT_SERVING',
          JSON.stringify(seen));
    // The drain notice keeps the listener open: a new connection still reaches the worker.
    const fresh = new Health(target, insecure, { 'grpc.use_local_subchannel_pool': 1 });
    const check1 = await call(fresh, 'Check', { service: '' });
    check('a new connection during the notice: Check says NOT_SERVING',
          check1.status === 'NOT_SERVING', JSON.stringify(check1));
    fresh.close();
    const code = await ended;
    check('the Watch stream ends when the drain starts (UNAVAILABLE)',
          code === grpc.status.UNAVAILABLE, String(code));
    health.close();
    exec.close();
    const { code: exitCode, sig } = await exited;
    check('the worker drains and exits 0', exitCode === 0, `code ${exitCode} signal ${sig}`);
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const failed = results.filter((x) => !x.ok).length;
  console.log(`${results.length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error('generic_clients: ' + (e && e.stack ? e.stack : e));
  const failed = results.filter((x) => !x.ok).length;
  console.log(`${results.length - failed} passed, ${failed + 1} failed`);
  process.exit(1);
});
