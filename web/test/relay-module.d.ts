// The module as a page imports it from a relay, typed by the installed package (the relay
// serves no declarations): docs/js-client.md, "The npm package and TypeScript". Used by
// web/test/usage.ts, type-checked by tests/js_package.rs.
declare module "http://relay:8080/client/gsrelay.js" {
  export * from "gsrelay";
}
