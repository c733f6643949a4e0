// Search on a site opened from disk (site/index.html, file://). Material's search runs in a Web
// Worker, and a browser starts no worker from a file:// page; Material's offline plugin answers
// with a polyfill it loads from unpkg.com, which this site does not fetch (it is read offline).
// This is that polyfill, written for this site: under file:// only, `Worker` runs the worker's
// script in a hidden same-origin iframe and relays messages both ways, as a worker would. The
// file name keeps "iframe-worker", so that the offline plugin adds no remote copy of its own.
(function () {
  "use strict";
  if (location.protocol !== "file:") {
    return;
  }

  function deliver(target, view, data) {
    // asynchronously, as messages between a page and its worker are
    setTimeout(function () {
      target.dispatchEvent(new view.MessageEvent("message", { data: data }));
    }, 0);
  }

  function FileWorker(url) {
    var events = new EventTarget();
    var frame = document.createElement("iframe");
    var queue = [];
    var ready = false;
    var self = this;
    frame.hidden = true;
    (document.body || document.documentElement).appendChild(frame);
    var scope = frame.contentWindow;
    scope.postMessage = function (data) {  // the worker's postMessage: to this page
      deliver(events, window, data);
    };
    scope.importScripts = function () {
      throw new Error("importScripts is not available to a worker of a file:// page");
    };
    var script = scope.document.createElement("script");
    script.src = new URL(url, document.baseURI).href;
    script.onload = function () {
      ready = true;
      queue.splice(0).forEach(function (data) { deliver(scope, scope, data); });
    };
    scope.document.head.appendChild(script);

    this.postMessage = function (data) {  // to the worker
      if (ready) {
        deliver(scope, scope, data);
      } else {
        queue.push(data);
      }
    };
    this.addEventListener = events.addEventListener.bind(events);
    this.removeEventListener = events.removeEventListener.bind(events);
    this.dispatchEvent = events.dispatchEvent.bind(events);
    this.terminate = function () {
      frame.remove();
    };
    events.addEventListener("message", function (event) {
      if (typeof self.onmessage === "function") {
        self.onmessage(event);
      }
    });
  }

  window.Worker = FileWorker;
})();
