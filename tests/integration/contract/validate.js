// SPDX-License-Identifier: LGPL-2.1-or-later
// Validates an OpenAPI description against the OpenAPI 3.0 schema (and its $refs):
// node validate.js docs/openapi.yaml; exit status 0 when valid.
"use strict";
const SwaggerParser = require("@apidevtools/swagger-parser");

SwaggerParser.validate(process.argv[2])
  .then((api) => {
    console.log("valid: OpenAPI %s, %d paths", api.openapi, Object.keys(api.paths).length);
  })
  .catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
