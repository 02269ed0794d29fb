// Errors anywhere on the page are listed at its top (and make data-status "error").
window.__opErrors = [];
window.__opShowError = function (msg) {
  window.__opErrors.push(String(msg));
  var box = document.getElementById('js-errors');
  if (box) {
    box.hidden = false;
    var li = document.createElement('li');
    li.textContent = String(msg);
    box.querySelector('ul').appendChild(li);
  }
  if (document.body) document.body.setAttribute('data-status', 'error');
};
window.addEventListener('error', function (e) { window.__opShowError('uncaught: ' + (e && e.message)); });
window.addEventListener('unhandledrejection', function (e) { window.__opShowError('unhandled rejection: ' + (e && e.reason)); });
