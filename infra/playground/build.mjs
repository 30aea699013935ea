// build bundles the playground page with esbuild into an output folder (argv[2], default
// infra/playground/dist): index.html, app.js and app.css. The output is byte-for-byte
// reproducible, since Go embeds the committed dist/ and a test rebuilds it to compare: no
// source maps, no hashes or timestamps, and paths taken from this file's place, not the cwd.
//
// Usage: node infra/playground/build.mjs [outdir]   (Node 22; packages from infra/node)

import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = resolve(here, '../node/node_modules');
// esbuild lives with the other packages in infra/node, not beside this script.
const esbuild = createRequire(join(nodeModules, 'x.js'))('esbuild');

const outdir = resolve(process.argv[2] ?? join(here, 'dist'));
await mkdir(outdir, { recursive: true });

await esbuild.build({
  absWorkingDir: here,
  nodePaths: [nodeModules],
  entryPoints: { app: 'src/main.jsx' },
  outdir,
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2022',
  jsx: 'automatic',
  minify: true,
  legalComments: 'none',
  sourcemap: false,
  charset: 'utf8',
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
});
await copyFile(join(here, 'index.html'), join(outdir, 'index.html'));
