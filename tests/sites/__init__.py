"""Sites built on v10r, in miniature: code that lives outside the project's packages and
plugs into them the way docs/ says a site's own does."""
