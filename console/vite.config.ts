import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

/**
 * Builds the console into console/dist, served by src/http/console under /console/.
 * Asset names carry a content hash, so the server may cache them for a year.
 */
export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  plugins: [preact()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The strict CSP allows no inline script: keep every script in a file.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
});
