// Runs in the app's hidden iframe at the end of a prompt=none request: hands the authorization response
// to the app that framed it, and to no other origin.
if (window.parent !== window) window.parent.postMessage(location.search, location.origin);
