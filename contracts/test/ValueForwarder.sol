// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/**
 * @title ValueForwarder
 * @notice A contract that pays a funding address, for the deposit watcher's tests: transfers that
 * arrive as internal calls rather than as a transaction's own value, including ones that are
 * undone by a revert and so must never be credited.
 */
contract ValueForwarder {
    error Undone();
    error ForwardFailed();

    /// Passes the whole value on to `to` in an internal call.
    function forward(address payable to) external payable {
        (bool ok,) = to.call{value: msg.value}("");
        if (!ok) revert ForwardFailed();
    }

    /// Splits the value between two recipients: two internal transfers in one transaction.
    function split(address payable first, address payable second) external payable {
        uint256 half = msg.value / 2;
        (bool ok1,) = first.call{value: half}("");
        (bool ok2,) = second.call{value: msg.value - half}("");
        if (!ok1 || !ok2) revert ForwardFailed();
    }

    /// Sends the value to `to` in a sub-call that then reverts; the revert is caught, so the
    /// transaction succeeds while the transfer inside it never happened.
    function forwardUndone(address payable to) external payable {
        try this.sendThenRevert{value: msg.value}(to) {} catch {}
    }

    /// Sends the value to `to` and then reverts, undoing the transfer.
    function sendThenRevert(address payable to) external payable {
        (bool ok,) = to.call{value: msg.value}("");
        if (!ok) revert ForwardFailed();
        revert Undone();
    }

    /// Pays the contract's whole balance to `to` through SELFDESTRUCT (which, since Cancun, moves
    /// the balance without deleting the contract unless it was created in the same transaction).
    function destroy(address payable to) external payable {
        selfdestruct(to);
    }

    receive() external payable {}
}
